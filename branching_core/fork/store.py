"""Fork state on disk: ``<workspace>/.pydantic-deep/forks/<fork_id>/``.

Layout::

    manifest.json              fork-level state + every branch's state, spec, cost, ids
    history/<branch_id>.json   the branch's latest (possibly partial) message history
    history/parent.json        the parent's history at the fork point (trimmed)
    checkpoints/...            see checkpoints.py

Every file is written atomically (temporary file + ``os.replace``), so a process killed at
any moment leaves the previous or the new version, never a torn one. Fork resolution is
also fsync'ed, in the background right after the merge (``ForkRecorder.save_settled``;
``flush()`` waits for it); creation and the frequent per-step updates are not (a killed
process loses nothing the kernel already has; a power cut loses at most recent steps, never
consistency).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from branching_core.atomicio import atomic_write, fsync_directory
from branching_core.errors import WorkspaceError
from branching_core.state_dir import ensure_gitignore, escape_target

PROJECT_STATE_DIR = ".pydantic-deep"
MANIFEST_VERSION = 1


def _atomic_write(path: Path, payload: bytes, *, durable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, payload, durable=durable)


class ForkStore:
    """Reads and writes fork state under ``root/.pydantic-deep/forks``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.forks_dir = self.root / PROJECT_STATE_DIR / "forks"

    def fork_dir(self, fork_id: str) -> Path:
        return self.forks_dir / fork_id

    def manifest_path(self, fork_id: str) -> Path:
        return self.fork_dir(fork_id) / "manifest.json"

    def history_path(self, fork_id: str, name: str) -> Path:
        return self.fork_dir(fork_id) / "history" / f"{name}.json"

    # -- writing -------------------------------------------------------------------------
    def _inside(self, path: Path) -> Path:
        """``path`` when it stays in the workspace; a repository that ships ``.pydantic-deep``
        (or ``forks/``) as a symlink leading elsewhere gets a refusal, never a write there."""
        leads_to = escape_target(self.root, path)
        if leads_to is not None:
            raise WorkspaceError(
                f"refusing to write fork state through a link that leaves the workspace: "
                f"{path} leads to {leads_to}"
            )
        return path

    def write_manifest(self, manifest: dict[str, Any], *, durable: bool = False) -> None:
        manifest = {**manifest, "version": MANIFEST_VERSION}
        payload = json.dumps(manifest, sort_keys=True, indent=1).encode()
        path = self._inside(self.manifest_path(manifest["fork_id"]))
        _atomic_write(path, payload, durable=durable)
        ensure_gitignore(self.root)  # forks/ never shows up in the user's git status

    def sync_manifest(self, fork_id: str) -> None:
        """fsync the manifest as it is now and its directory (the durable half of
        ``write_manifest(durable=True)``, for a manifest already written)."""
        path = self.manifest_path(fork_id)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:  # removed meanwhile (retention): nothing left to make durable
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_directory(path.parent)

    def write_history(
        self, fork_id: str, name: str, payload: bytes, *, durable: bool = False
    ) -> None:
        """``payload`` is pydantic-ai's JSON of a message list (``ModelMessagesTypeAdapter``)."""
        _atomic_write(self._inside(self.history_path(fork_id, name)), payload, durable=durable)

    # -- reading -------------------------------------------------------------------------
    def read_manifest(self, fork_id: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.manifest_path(fork_id).read_bytes())
        except (OSError, ValueError):
            return None

    def read_history(self, fork_id: str, name: str) -> bytes | None:
        try:
            return self.history_path(fork_id, name).read_bytes()
        except OSError:
            return None

    def list_forks(self, *, include_creating: bool = False) -> list[dict[str, Any]]:
        """Every readable manifest, oldest first; the intents of forks still (or, killed,
        forever) being created only with ``include_creating`` (see ``fork/sweep.py``)."""
        if not self.forks_dir.is_dir():
            return []
        out = []
        for entry in self.forks_dir.iterdir():
            manifest = self.read_manifest(entry.name)
            if manifest is not None and (include_creating or not manifest.get("creating")):
                out.append(manifest)
        return sorted(out, key=lambda m: (m.get("depth", 1), m.get("created_at", 0.0)))

    def list_open(self) -> list[dict[str, Any]]:
        """Forks not yet merged or aborted (what a restarted app must offer to resolve)."""
        return [m for m in self.list_forks() if not m.get("resolved")]

    def remove(self, fork_id: str) -> None:
        shutil.rmtree(self.fork_dir(fork_id), ignore_errors=True)


__all__ = ["PROJECT_STATE_DIR", "ForkStore"]
