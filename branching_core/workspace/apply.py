"""Applying a branch's changes into its parent path by path (not a commit).

A branch commit is atomic and first-winner: once one sibling commits, the others are
stale and their ``commit()`` aborts them. Callers whose siblings are *all* meant to land
when they touched different files (the fork coordinator's stale winner, sub-agents that
finish together) use these two functions instead: :func:`changed_since` finds the paths
the parent changed after the branch was created (the same ctime rule as a commit's
conflict check), and :func:`apply_paths` copies the rest over, each file published by
rename so a reader never sees a torn one. It is not crash-atomic as a whole (a commit
is); that is the price of landing a stale branch at all.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class AppliedPaths:
    """What :func:`apply_paths` did: files written, paths removed, per-path errors."""

    applied: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)


def changed_since(changes: Any, parent_dir: Path, created_ns: int) -> list[str]:
    """Paths the branch changed that the parent changed (or lost) after ``created_ns``.

    A path the branch wrote that a third party deleted or renamed away meanwhile (the
    branch's ``lost_in_parent``, from ``Branch.changes()``) is one too: applying it would
    resurrect the deleted file.
    """
    out = []
    lost = set(getattr(changes, "lost_in_parent", ()))
    for rel in changes.all_paths:
        target = parent_dir / rel
        try:
            st = os.lstat(target)
        except (FileNotFoundError, NotADirectoryError):
            if rel in changes.modified or rel in changes.deleted or rel in lost:
                out.append(rel)
            continue
        if st.st_ctime_ns > created_ns and not target.is_dir():
            out.append(rel)
    return sorted(out)


def apply_paths(
    src_root: Path,
    dst_root: Path,
    changes: Any,
    *,
    skip: Collection[str] = (),
    is_dir: Collection[str] | None = None,
) -> AppliedPaths:
    """Copy created/modified paths (shallow first), remove deleted ones (deep first).

    ``skip`` paths (conflicts) are left as the parent has them, and so is anything under or
    above one. ``is_dir`` names the changed paths that are directories in the branch (read
    from the branch when not given).
    """
    done = AppliedPaths()

    def skipped(rel: str) -> bool:
        return any(rel == c or rel.startswith(c + "/") or c.startswith(rel + "/") for c in skip)

    for rel in sorted({*changes.created, *changes.modified}, key=lambda p: p.count("/")):
        if skipped(rel):
            continue
        src, dst = src_root / rel, dst_root / rel
        try:
            if is_dir is not None:
                directory = rel in is_dir
            else:
                directory = src.is_dir() and not src.is_symlink()
            if directory:
                dst.mkdir(parents=True, exist_ok=True)
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.is_dir() and not dst.is_symlink():
                shutil.rmtree(dst)
            tmp = dst.with_name(f".{dst.name}.apply-{os.getpid()}")
            if src.is_symlink():
                os.symlink(os.readlink(src), tmp)
            else:
                shutil.copy2(src, tmp)
            os.replace(tmp, dst)
            done.applied.append(rel)
        except OSError as exc:
            done.errors.append((rel, f"{type(exc).__name__}: {exc}"))
    for rel in sorted(changes.deleted, key=lambda p: -p.count("/")):
        if skipped(rel):
            continue
        dst = dst_root / rel
        try:
            if dst.is_dir() and not dst.is_symlink():
                shutil.rmtree(dst)
            elif os.path.lexists(dst):
                dst.unlink()
            done.deleted.append(rel)
        except OSError as exc:
            done.errors.append((rel, f"{type(exc).__name__}: {exc}"))
    return done


__all__ = ["AppliedPaths", "apply_paths", "changed_since"]
