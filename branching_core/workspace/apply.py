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

from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from branching_core.workspace.changes import Op, find_conflicts, held_at_fork


def change_ops(
    changes: Any = None,
    *,
    written: Iterable[str] = (),
    existed: Collection[str] = (),
    deleted: Iterable[str] = (),
) -> list[Op]:
    """A change as the ops the one conflict rule reads (``changes.find_conflicts``).

    ``changes`` is a ``Branch.changes()`` value: what the branch modified (or lost in the
    parent) was there when it was made, what it created was not. Callers that land
    something other than a branch say the same with ``written`` (paths it puts),
    ``existed`` (those of them the parent held when the change began: a combine's paths
    from the branches, a Ray snapshot's manifest) and ``deleted``."""
    ops: list[Op] = []
    if changes is not None:
        was_there = held_at_fork(changes)
        ops += [Op("put", rel, existed=rel in was_there) for rel in sorted(
            {*changes.created, *was_there})]
        ops += [Op("delete", rel) for rel in changes.deleted]
    ops += [Op("put", rel, existed=rel in existed) for rel in written]
    ops += [Op("delete", rel) for rel in deleted]
    return ops


def changed_since(changes: Any, parent_dir: Path, created_ns: int) -> list[str]:
    """Paths the branch changed that the parent changed (or lost) after ``created_ns``.

    The one conflict rule (``changes.find_conflicts``, what ``Branch.commit`` and
    ``land.land_files`` check) applied to ``changes`` without landing anything: a path
    the parent changed after ``created_ns``, or one the branch modified that a third party
    deleted or renamed away meanwhile (applying it would resurrect the deleted file).
    """
    return find_conflicts(change_ops(changes), parent_dir, created_ns)


__all__ = ["change_ops", "changed_since"]
