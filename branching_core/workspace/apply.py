# pyright: strict
"""Which of a stale branch's paths the parent changed since (not a commit).

A branch commit is atomic and first-winner: once one sibling commits, the others are
stale and their ``commit()`` aborts them. Callers whose siblings are *all* meant to land
when they touched different files (the fork coordinator's stale winner, sub-agents that
finish together) find the paths the parent changed after the branch was created with
:func:`changed_since` (the same ctime rule as a commit's conflict check) and land the rest
through the one landing function (``land.branch_files`` + ``land.land_files``: journaled,
all or nothing, under the landing rule). Copying path by path, which this module did
before, followed links and was not crash-atomic.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def changed_since(changes: Any, parent_dir: Path, created_ns: int) -> list[str]:
    """Paths the branch changed that the parent changed (or lost) after ``created_ns``.

    A path the branch wrote that a third party deleted or renamed away meanwhile (the
    branch's ``lost_in_parent``, from ``Branch.changes()``) is one too: applying it would
    resurrect the deleted file.
    """
    out: list[str] = []
    lost: set[str] = set(getattr(changes, "lost_in_parent", ()))
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


__all__ = ["changed_since"]
