"""Checkpoint anchors ``fork:<id>`` and ``post-fork:<id>``, with files.

``fork:<id>`` is saved when the fork is created (the parent's history at the fork point);
``post-fork:<id>`` when it is merged (the winner's merged history). Unlike seed 003,
rewinding restores **files** too. How, and why it is exact:

* Just before the winner is committed, every path the merge is about to change (the
  winner's created, modified and deleted paths) is recorded from the parent into
  ``checkpoints/fork/``: its bytes, or that it was a directory, a symlink or absent.
  Right after the merge, the same paths are recorded into ``checkpoints/post-fork/``.
* A path the merge applies was, by the workspace's commit rule, *not* changed in the
  parent since the branch was created (otherwise it is a conflict and is not applied), so
  its pre-merge content *is* its pre-fork content. Restoring the recorded paths therefore
  returns the parent to its pre-fork state as far as the fork is concerned; changes other
  people made to other paths meanwhile are left alone.
* Before a merge, a fork has not changed the parent at all, so rewinding to ``fork:<id>``
  restores only the history.

Layout: ``.pydantic-deep/forks/<fork_id>/checkpoints/<fork|post-fork>/{checkpoint.json,
index.json, files/...}``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branching_core.fork.history import load_history
from branching_core.fork.store import ForkStore, _atomic_write

KINDS = ("fork", "post-fork")


@dataclass
class Checkpoint:
    """One saved anchor."""

    id: str
    """``fork:<fork_id>`` or ``post-fork:<fork_id>``."""
    fork_id: str
    kind: str
    created_at: float
    has_files: bool
    parent_workspace_branch_id: str | None


def parse_checkpoint_id(checkpoint_id: str) -> tuple[str, str]:
    kind, sep, fork_id = checkpoint_id.partition(":")
    if not sep or kind not in KINDS or not fork_id:
        raise ValueError(
            f"not a fork checkpoint id: {checkpoint_id!r} (want fork:<id> or post-fork:<id>)"
        )
    return kind, fork_id


class CheckpointStore:
    """Saves and restores the fork anchors of one workspace."""

    def __init__(self, store: ForkStore) -> None:
        self.store = store

    def _dir(self, fork_id: str, kind: str) -> Path:
        return self.store.fork_dir(fork_id) / "checkpoints" / kind

    def save(
        self,
        fork_id: str,
        kind: str,
        history_json: bytes,
        *,
        parent_workspace_branch_id: str | None = None,
    ) -> str:
        """Record the history of anchor ``kind`` (``fork`` or ``post-fork``); returns its id."""
        base = self._dir(fork_id, kind)
        _atomic_write(base / "history.json", history_json)
        meta = {
            "id": f"{kind}:{fork_id}",
            "fork_id": fork_id,
            "kind": kind,
            "created_at": time.time(),
            "parent_workspace_branch_id": parent_workspace_branch_id,
        }
        _atomic_write(base / "checkpoint.json", json.dumps(meta).encode())
        return meta["id"]

    def record_files(self, fork_id: str, kind: str, parent_dir: Path, paths: list[str]) -> None:
        """Record the current state of ``paths`` (relative to ``parent_dir``) into ``kind``."""
        base = self._dir(fork_id, kind)
        files = base / "files"
        if files.exists():
            shutil.rmtree(files)
        index: dict[str, str] = {}
        made: set[Path] = set()
        for rel in sorted(set(paths)):
            src = parent_dir / rel
            try:
                st = os.lstat(src)
            except FileNotFoundError:
                index[rel] = "absent"
                continue
            if os.path.islink(src):
                index[rel] = "link:" + os.readlink(src)
            elif os.path.isdir(src):
                index[rel] = "dir"
            else:
                dst = files / rel
                if dst.parent not in made:
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    made.add(dst.parent)
                shutil.copyfile(src, dst)
                os.chmod(dst, st.st_mode & 0o7777)
                index[rel] = "file"
        _atomic_write(base / "index.json", json.dumps(index, sort_keys=True).encode(), durable=True)

    def get(self, checkpoint_id: str) -> Checkpoint | None:
        kind, fork_id = parse_checkpoint_id(checkpoint_id)
        base = self._dir(fork_id, kind)
        try:
            meta = json.loads((base / "checkpoint.json").read_bytes())
        except (OSError, ValueError):
            return None
        return Checkpoint(
            id=meta["id"],
            fork_id=fork_id,
            kind=kind,
            created_at=float(meta["created_at"]),
            has_files=(base / "index.json").exists(),
            parent_workspace_branch_id=meta.get("parent_workspace_branch_id"),
        )

    def list(self) -> list[Checkpoint]:
        out = []
        if self.store.forks_dir.is_dir():
            for fork_dir in self.store.forks_dir.iterdir():
                for kind in KINDS:
                    cp = self.get(f"{kind}:{fork_dir.name}")
                    if cp is not None:
                        out.append(cp)
        return sorted(out, key=lambda c: c.created_at)

    def rewind(self, checkpoint_id: str, target_dir: Path | None = None) -> list[Any]:
        """Restore the files of ``checkpoint_id`` into ``target_dir``; return its history.

        ``target_dir`` defaults to the workspace root (right for a fork of the main run; a
        nested fork's anchors restore into its parent branch's ``path``).
        """
        kind, fork_id = parse_checkpoint_id(checkpoint_id)
        base = self._dir(fork_id, kind)
        if not (base / "checkpoint.json").exists():
            raise KeyError(f"no checkpoint {checkpoint_id!r}")
        target = Path(target_dir) if target_dir is not None else self.store.root
        index_path = base / "index.json"
        if kind == "fork" and not index_path.exists():
            index: dict[str, str] = {}
        else:
            try:
                index = json.loads(index_path.read_bytes())
            except OSError:
                index = {}
        self._restore(index, base / "files", target)
        return load_history((base / "history.json").read_bytes())

    @staticmethod
    def _restore(index: dict[str, str], files: Path, target: Path) -> None:
        def remove(path: Path) -> None:
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.is_dir():
                shutil.rmtree(path)

        # Deepest first for removals, shallowest first for creations.
        for rel in sorted(index, key=lambda p: -p.count("/")):
            if index[rel] == "absent":
                remove(target / rel) if os.path.lexists(target / rel) else None
        for rel in sorted(index, key=lambda p: p.count("/")):
            state = index[rel]
            dst = target / rel
            if state == "dir":
                if os.path.lexists(dst) and not dst.is_dir():
                    remove(dst)
                dst.mkdir(parents=True, exist_ok=True)
            elif state == "file":
                if os.path.lexists(dst) and (dst.is_dir() or dst.is_symlink()):
                    remove(dst)
                dst.parent.mkdir(parents=True, exist_ok=True)
                _atomic_write(dst, (files / rel).read_bytes())
                os.chmod(dst, os.stat(files / rel).st_mode & 0o7777)
            elif state.startswith("link:"):
                if os.path.lexists(dst):
                    remove(dst)
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(state[5:], dst)


__all__ = ["Checkpoint", "CheckpointStore", "parse_checkpoint_id"]
