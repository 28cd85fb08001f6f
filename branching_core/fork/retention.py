"""What ``.pydantic-deep/forks`` keeps of resolved forks, and what it holds.

Every fork leaves ``forks/<id>/``: its manifest, every branch's history, and its
checkpoints, which include copies of every file the merge replaced (and of what it wrote),
so ``rewind_to_checkpoint`` can restore them. Kept forever, a fork that touched a 100 MB
file would cost 200 MB for good. The policy (:func:`prune_resolved`):

* open forks (not merged nor aborted) are never touched;
* the newest ``REWIND_WINDOW`` resolved forks are kept whole: they can be rewound;
* older resolved forks lose their file copies (``checkpoints/*/files``, a rewind of them
  would restore files later merges may have changed anyway) but keep their manifest and
  histories (what each branch did, its cost), until
* beyond the newest ``keep_resolved`` resolved forks (``[fork] keep_resolved`` in
  config.toml, default 20; ``None`` keeps every one) the fork directory is removed;
* a fork whose review mirror was kept on purpose (``keep_artifacts``) is left alone.

:func:`forks_usage` lists what the directory holds (for ``forkdeck status``).
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branching_core.fork.checkpoints import PRUNED
from branching_core.fork.store import ForkStore

log = logging.getLogger(__name__)

DEFAULT_KEEP_RESOLVED = 20
REWIND_WINDOW = 3
"""Resolved forks (newest first) whose file copies are kept, so they can be rewound."""
_KEPT_MIRROR = "mirror.json"


@dataclass(frozen=True)
class ForkUsage:
    """One ``forks/<id>/`` directory: what it is and what it costs on disk."""

    fork_id: str
    state: str
    """``open``, ``creating``, ``resolved: <resolution>`` or ``unreadable``."""
    created_at: float | None
    resolved_at: float | None
    branches: int
    size_bytes: int
    rewindable: bool
    """Its checkpoint file copies are still there."""


def _size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _resolved_at(store: ForkStore, manifest: dict[str, Any]) -> float:
    value = manifest.get("resolved_at")
    if isinstance(value, int | float):
        return float(value)
    try:
        return store.manifest_path(str(manifest["fork_id"])).stat().st_mtime
    except OSError:
        return 0.0


def _has_files(fork_dir: Path) -> bool:
    kinds = ("fork", "post-fork")
    return any((fork_dir / "checkpoints" / kind / "files").exists() for kind in kinds)


def forks_usage(store: ForkStore) -> list[ForkUsage]:
    """Every fork directory, oldest first, with its state and size."""
    if not store.forks_dir.is_dir():
        return []
    out = []
    for fork_dir in store.forks_dir.iterdir():
        if not fork_dir.is_dir():
            continue
        manifest = store.read_manifest(fork_dir.name)
        if manifest is None:
            state, created, resolved_at, branches = "unreadable", None, None, 0
        else:
            if manifest.get("creating"):
                state = "creating"
            elif manifest.get("resolved"):
                state = f"resolved: {manifest.get('resolution')}"
            else:
                state = "open"
            created = manifest.get("created_at")
            resolved_at = _resolved_at(store, manifest) if manifest.get("resolved") else None
            branches = len(manifest.get("branches") or [])
        out.append(
            ForkUsage(
                fork_id=fork_dir.name,
                state=state,
                created_at=float(created) if isinstance(created, int | float) else None,
                resolved_at=resolved_at,
                branches=branches,
                size_bytes=_size(fork_dir),
                rewindable=_has_files(fork_dir),
            )
        )
    return sorted(out, key=lambda u: (u.created_at or 0.0, u.fork_id))


def keep_resolved_setting(root: Path) -> int:
    """``[fork] keep_resolved`` of the workspace's config.toml (the default if unset)."""
    from branching_core.config import load_settings

    try:
        return load_settings(root).settings.keep_resolved
    except Exception:  # a config file that breaks the reader must not break a merge
        return DEFAULT_KEEP_RESOLVED


def prune_resolved(store: ForkStore, keep_resolved: int | str | None = "settings") -> list[str]:
    """Apply the policy of the module docstring; returns the fork ids whose directory was
    removed. ``keep_resolved``: a count, ``"all"``/``None`` (no limit) or ``"settings"``
    (config.toml). Never raises for a directory it cannot clean (logged, tried next time)."""
    if keep_resolved == "settings":
        keep_resolved = keep_resolved_setting(store.root)
    limit = keep_resolved if isinstance(keep_resolved, int) else None
    resolved = [
        m
        for m in store.list_forks()
        if m.get("resolved") and not (store.fork_dir(str(m["fork_id"])) / _KEPT_MIRROR).exists()
    ]
    resolved.sort(key=lambda m: _resolved_at(store, m), reverse=True)
    removed = []
    for rank, manifest in enumerate(resolved):
        fork_id = str(manifest["fork_id"])
        fork_dir = store.fork_dir(fork_id)
        try:
            if limit is not None and rank >= limit:
                shutil.rmtree(fork_dir)
                removed.append(fork_id)
            elif rank >= REWIND_WINDOW:
                for kind in ("fork", "post-fork"):
                    files = fork_dir / "checkpoints" / kind / "files"
                    if files.exists():
                        (files.parent / PRUNED).write_bytes(b"")
                        shutil.rmtree(files)
                        (files.parent / "index.json").unlink(missing_ok=True)
        except OSError as exc:
            log.warning("cannot prune fork %s: %s", fork_id, exc)
    return removed


__all__ = [
    "DEFAULT_KEEP_RESOLVED",
    "REWIND_WINDOW",
    "ForkUsage",
    "forks_usage",
    "keep_resolved_setting",
    "prune_resolved",
]
