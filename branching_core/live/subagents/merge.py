"""Landing a finished sub-agent's copy-on-write branch in its parent's view.

The workspace's rule is first-winner: once one sibling commits, the others are stale and
their ``commit()`` aborts them. Sub-agents spawned together are meant to *all* land when
they touched different files, so a stale branch is applied path by path instead (the same
fallback the fork coordinator uses), after checking that none of its paths changed in the
parent since it was created. A branch whose paths collide is not applied at all: it is a
conflict, reported to the parent with the paths, never a silent partial overwrite.

Landings into one parent are serialised by :func:`landing_lock`, one asyncio lock per
parent *path*, which the fork coordinator's merges take too: the stale check and the
commit of a sub-agent and of a fork's winner can never interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branching_core.errors import ConflictError
from branching_core.workspace.changes import held_at_fork
from branching_core.workspace.land import branch_files, land_files
from branching_core.workspace.landing import landing_lock


@dataclass
class Landing:
    """What happened to a branch's file changes."""

    committed: bool = False
    method: str | None = None
    """``commit`` (the workspace's atomic commit), ``per_path`` (a stale sibling's changes
    landed path by path in one journaled commit) or ``nothing`` (no file changed)."""
    conflicts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def _land_paths(branch: Any, changes: Any) -> None:
    """A stale branch's paths in one journaled commit through the one landing function
    with its one conflict rule: all of them or, on a conflict, none (``ConflictError``
    naming every path the parent changed since the branch was made, or lost meanwhile)."""
    root = Path(branch.path)
    files, dirs = branch_files(root, changes)
    land_files(
        branch.parent,
        files,
        dirs=dirs,
        since_ns=branch.created_ns,
        source_root=root,
        label=f"branch {branch.name} (path by path)",
        existed=held_at_fork(changes),
    )


async def abort_quietly(branch: Any) -> None:
    """Abort ``branch`` if it is still open (in a worker thread: unmounting may block)."""
    if branch is not None and branch.is_open:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(branch.abort)


async def land(branch: Any) -> Landing:
    """Commit ``branch`` into its parent, sibling-safe; the branch is closed afterwards."""
    async with landing_lock(branch.parent):
        try:
            return await _land_locked(branch)
        finally:
            await abort_quietly(branch)


async def _land_locked(branch: Any) -> Landing:
    changes = await asyncio.to_thread(branch.changes)
    landing = Landing(
        created=list(changes.created),
        modified=list(changes.modified),
        deleted=list(changes.deleted),
    )
    if not changes.all_paths:
        # Nothing to publish: a commit would only make the siblings stale.
        landing.committed = True
        landing.method = "nothing"
        return landing
    if not branch.is_stale:
        try:
            await asyncio.to_thread(branch.commit)
            landing.committed = True
            landing.method = "commit"
            return landing
        except ConflictError as exc:
            if exc.stale:
                # A commit from outside this lock won the race and the workspace aborted
                # this branch: nothing is left to apply, say so.
                landing.errors.append(str(exc))
            else:
                landing.conflicts = sorted(exc.paths)
            return landing
    try:
        await asyncio.to_thread(_land_paths, branch, changes)
    except ConflictError as exc:
        landing.conflicts = sorted(exc.paths)
        return landing
    landing.committed = True
    landing.method = "per_path"
    return landing


__all__ = ["Landing", "abort_quietly", "land", "landing_lock"]
