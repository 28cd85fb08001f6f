"""Land a set of whole files into a workspace (or branch) in one journaled commit.

Why: a combined merge (``fork.combine``) knows every byte it wants in the parent before
it writes anything. Routing that through a fresh branch cost a branch (on the copy
backend a full copy of the tree: ~600 ms for 1,000 files, to publish 100), a copy-up of
every target on overlay, two diffs of the branch and its disposal. Here the new contents
are staged straight into the commit's scratch on the parent's filesystem, and the very
same commit engine as ``Branch.commit`` publishes them: conflict rule (ctime after
``since_ns``, or gone from the parent), structural and permission pre-checks, the journal
as commit point, rename into place, roll forward after a crash or back after a failed
step, and the parent's generation bumped (open siblings become stale, as after any
commit). Staging that never reached its journal is swept at the next open.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from branching_core.errors import CommitError
from branching_core.workspace.changes import BranchChanges, Op, summarize
from branching_core.workspace.fsutil import PROJECT_STATE_DIR, lstat_or_none
from branching_core.workspace.journal import (
    Journal,
    _make_scratch,
    _remove_empty_state_dirs,
    scratch_dir,
    state_intent,
)
from branching_core.workspace.precheck import refuse_unapplicable
from branching_core.workspace.signals import deferred_signals
from branching_core.workspace.store import Store
from branching_core.workspace.treescan import remove_tree

if TYPE_CHECKING:
    from branching_core.workspace.branch import _Node


@dataclass(frozen=True)
class NewFile:
    """What lands at one path: ``data`` (a regular file; keeps the mode of the file it
    replaces, else the umask's) or a copy of ``source`` (a file with its mode, or a
    symlink as a symlink)."""

    data: bytes | None = None
    source: Path | None = None


def land_files(
    node: _Node, files: Mapping[str, NewFile | None], *, since_ns: int, label: str = "landing"
) -> BranchChanges:
    """Publish ``files`` (relative path -> new content, ``None`` deletes it) into ``node``
    all or nothing, and say what changed.

    Raises ``ConflictError`` (nothing applied) when the parent changed one of the paths
    after ``since_ns`` or cannot take it (a file where a directory is needed...), and
    ``CommitError`` (nothing applied, or rolled back) when it cannot be written. A commit
    interrupted past its commit point is finished when the workspace is next opened.
    """
    for rel in files:
        parts = Path(rel).parts
        if not rel or Path(rel).is_absolute() or ".." in parts or parts[0] == PROJECT_STATE_DIR:
            raise ValueError(f"{rel!r}: not a path inside the workspace")
    ws = node.workspace
    store = ws.tree.store
    parent_root = node.parent_view().root
    with store.commit_lock():
        commit_id = store.new_branch_id()
        scratch = scratch_dir(parent_root, commit_id)
        made_state_dir = not (parent_root / PROJECT_STATE_DIR).exists()
        intent = state_intent(store.journal_dir, commit_id) if made_state_dir else None
        try:
            ops = _stage(files, parent_root, scratch / "new", intent)
            changes = summarize(ops, parent_root)
            refuse_unapplicable(
                ops,
                parent_root,
                since_ns=since_ns,
                parent_name=node.branch_path,
                since=f"{label} began",
                cannot=f"land {label}",
            )
            journal = Journal.prepare(
                store.journal_dir,
                commit_id,
                parent_id=node.node_id,
                parent_root=parent_root,
                ops=ops,
                generation=store.generation(node.node_id) + 1,
                branch_id=commit_id,  # no branch directory: a replay has none to remove
            )
            journal.created_state_dir = made_state_dir  # the staging above made it, if so
        except BaseException as exc:
            remove_tree(scratch, external=False)
            _remove_empty_state_dirs(parent_root, remove_state_dir=made_state_dir, intent=intent)
            if isinstance(exc, OSError):
                raise CommitError(f"cannot land {label}: {exc}; nothing was applied") from exc
            raise
        _publish(journal, store, label)
    return changes


def _stage(
    files: Mapping[str, NewFile | None], parent_root: Path, staging: Path, intent: Path | None
) -> list[Op]:
    """The commit's operations, with every new file written under ``staging``."""
    ops: list[Op] = []
    made_dirs: set[str] = set()
    _make_scratch(staging, staging.parent, intent)
    dir_mode = stat.S_IMODE(os.stat(staging).st_mode)  # 0o777 less the umask, as mkdir -p
    for index, rel in enumerate(sorted(files)):
        content = files[rel]
        target = parent_root / rel
        st = lstat_or_none(target)
        if content is None:
            if st is not None:
                ops.append(Op("delete", rel))
            continue
        if st is not None and stat.S_ISDIR(st.st_mode):
            ops.append(Op("delete", rel))
        head = rel
        while "/" in head:  # missing directories above it, made by the commit
            head = head.rsplit("/", 1)[0]
            if head in made_dirs or lstat_or_none(parent_root / head) is not None:
                break
            made_dirs.add(head)
            ops.append(Op("mkdir", head, mode=dir_mode))
        staged = staging / str(index)
        if content.source is not None:
            if content.source.is_symlink():
                os.symlink(os.readlink(content.source), staged)
            else:
                shutil.copyfile(content.source, staged)
                shutil.copymode(content.source, staged)
        else:
            staged.write_bytes(content.data or b"")
            if st is not None and stat.S_ISREG(st.st_mode):
                os.chmod(staged, stat.S_IMODE(st.st_mode))
        ops.append(Op("put", rel, source=str(staged), existed=st is not None))
    return ops


def _publish(journal: Journal, store: Store, label: str) -> None:
    """The commit point and after: as ``Branch._publish``, without a branch to keep."""
    set_generation = store.set_generation
    with deferred_signals():
        held = journal.reach_commit_point(lambda: None, f"cannot land {label}")
        outcome = journal.run(set_generation)
        held = held or outcome.interrupt
        if outcome.pending:
            cause = outcome.errors[-1] if outcome.errors else "repeated interruptions"
            error = CommitError(
                f"landing {label} interrupted by {cause}; it will be finished when the "
                "workspace is next opened"
            )
        elif outcome.rolled_back:
            error = CommitError(
                f"landing {label} failed ({outcome.errors[0]}) and was rolled back; "
                "nothing was applied"
            )
        else:
            if held is not None:
                raise held
            return
        if held is not None:
            raise held from error
        raise error


__all__ = ["NewFile", "land_files"]
