# pyright: strict
"""The one landing function: a set of whole files, links and directories into a
workspace (or branch) in one journaled commit, under the one landing rule.

Every landing that is not a whole branch's own commit comes here: a combine, a stale fork
winner's or sub-agent's paths (:func:`branch_files`), a Ray node's delta
(``cluster.delta.apply``). ``Branch.commit`` shares everything from the landing rule on
(``guard.check_landing``, the journal, the publish step), so both land alike.

Why no intermediate branch: a combined merge (``fork.combine``) knows every byte it
wants in the parent before it writes anything. Routing that through a fresh branch cost
a branch (on the copy backend a full copy of the tree: ~600 ms for 1,000 files, to
publish 100), a copy-up of every target on overlay, two diffs of the branch and its
disposal. Here the new contents are staged straight into the commit's scratch on the
parent's filesystem, and the very same commit engine as ``Branch.commit`` publishes
them: conflict rule (ctime after ``since_ns``, or gone from the parent), structural and
permission pre-checks, the journal as commit point, rename into place, roll forward
after a crash or back after a failed step, and the parent's generation bumped (open
siblings become stale, as after any commit). Staging that never reached its journal is
swept at the next open.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core.errors import CommitError, UnsafeChangeError
from branching_core.workspace import beneath
from branching_core.workspace.changes import BranchChanges, Op, summarize
from branching_core.workspace.fsutil import PROJECT_STATE_DIR, lstat_or_none
from branching_core.workspace.guard import check_landing, linked_steps, refuse, special_kind
from branching_core.workspace.journal import (
    Journal,
    make_scratch,
    remove_empty_state_dirs,
    scratch_dir,
    state_intent,
)
from branching_core.workspace.paths import path_problem
from branching_core.workspace.signals import deferred_signals
from branching_core.workspace.store import Store
from branching_core.workspace.treescan import remove_tree

if TYPE_CHECKING:
    from branching_core.workspace.branch import Node


@dataclass(frozen=True)
class NewFile:
    """What lands at one path: ``data`` (a regular file; mode ``mode``, else the mode of
    the file it replaces, else the umask's), ``link`` (a symlink to that target), or a
    copy of ``source`` (a file with its mode, or a symlink as a symlink; with the
    ``source_root`` of :func:`land_files`, ``source`` is relative to it and reached
    without following any link)."""

    data: bytes | None = None
    source: Path | str | None = None
    mode: int | None = None
    link: str | None = None
    root: Path | None = None
    """For ``source``: the root it is relative to (else ``land_files``' ``source_root``)."""


def land_files(
    node: Node,
    files: Mapping[str, NewFile | None],
    *,
    since_ns: int | None,
    label: str = "landing",
    dirs: Mapping[str, int] | None = None,
    source_root: Path | None = None,
    keep_privileges: bool = False,
    existed: Collection[str] = (),
) -> BranchChanges:
    """Publish ``files`` (relative path -> new content, ``None`` deletes it) and ``dirs``
    (relative path -> mode of a directory to make or re-mode) into ``node`` all or
    nothing, and say what changed.

    The one landing function: its checks are the landing rule of ``workspace.guard``
    (the same as ``Branch.commit``'s). Raises ``UnsafeChangeError`` (nothing applied) for
    a path that is not plainly inside the workspace, goes through a symlink, or a device
    /FIFO/socket source; ``ConflictError`` (nothing applied) when the parent changed one
    of the paths after ``since_ns`` (None: the caller checked conflicts against its own
    record) or cannot take it (a file where a directory is needed...); ``CommitError``
    (nothing applied, or rolled back) when it cannot be written. setuid/setgid bits and
    file capabilities are stripped unless ``keep_privileges``. ``existed``: paths the
    parent held when the change began (``since_ns``); one of them now missing from the
    parent was deleted by someone else meanwhile, a conflict under the same one rule
    (``changes.find_conflicts``) rather than a resurrection. A commit interrupted past
    its commit point is finished when the workspace is next opened.
    """
    dirs = dict(dirs or {})
    problems = [
        (str(rel), reason) for rel in [*files, *dirs] if (reason := path_problem(rel))
    ]
    if problems:
        raise refuse(problems, label)
    ws = node.workspace
    store = ws.tree.store
    parent_root = node.parent_view().root
    depth = str.count
    steps = [
        *((rel, None) for rel, c in files.items() if c is None),
        *((rel, "d") for rel in sorted(dirs, key=lambda r: depth(r, "/"))),
        *(
            (rel, "l" if c.link is not None else "f")
            for rel, c in sorted(files.items(), key=lambda item: depth(item[0], "/"))
            if c is not None
        ),
    ]
    problems = linked_steps(steps, parent_root)
    if problems:
        raise refuse(problems, label)
    with store.commit_lock():
        commit_id = store.new_branch_id()
        scratch = scratch_dir(parent_root, commit_id)
        made_state_dir = not (parent_root / PROJECT_STATE_DIR).exists()
        intent = state_intent(store.journal_dir, commit_id) if made_state_dir else None
        try:
            ops = _stage(files, dirs, parent_root, scratch / "new", intent, source_root, existed)
            ops = check_landing(
                ops,
                parent_root,
                since_ns=since_ns,
                parent_name=node.branch_path,
                since=f"{label} began",
                cannot=f"land {label}",
                what=label,
                keep_privileges=keep_privileges,
            )
            changes = summarize(ops, parent_root)
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
            remove_empty_state_dirs(parent_root, remove_state_dir=made_state_dir, intent=intent)
            if isinstance(exc, OSError):
                raise CommitError(f"cannot land {label}: {exc}; nothing was applied") from exc
            raise
        _publish(journal, store, label)
    return changes


def branch_files(
    branch_dir: Path, changes: Any, *, skip: Collection[str] = ()
) -> tuple[dict[str, NewFile | None], dict[str, int]]:
    """A branch's changes (``Branch.changes()``) as :func:`land_files` arguments, with
    ``source_root=branch_dir``: what a stale fork winner or sub-agent lands path by path.

    ``skip`` paths (conflicts) are left as the parent has them, and so is anything under
    or above one. Directories are read from the branch without following links.
    """

    def skipped(rel: str) -> bool:
        return any(rel == c or rel.startswith(c + "/") or c.startswith(rel + "/") for c in skip)

    files: dict[str, NewFile | None] = {}
    dirs: dict[str, int] = {}
    for rel in sorted({*changes.created, *changes.modified}):
        if skipped(rel):
            continue
        st = beneath.lstat(branch_dir, rel) if path_problem(rel) is None else None
        if st is not None and stat.S_ISDIR(st.st_mode):
            dirs[rel] = stat.S_IMODE(st.st_mode)
        else:
            files[rel] = NewFile(source=rel)
    written = {*files, *dirs}
    for rel in changes.deleted:
        if not skipped(rel) and rel not in written:
            files[rel] = None
    return files, dirs


def _stage(
    files: Mapping[str, NewFile | None],
    dirs: Mapping[str, int],
    parent_root: Path,
    staging: Path,
    intent: Path | None,
    source_root: Path | None,
    existed: Collection[str] = (),
) -> list[Op]:
    """The commit's operations, with every new file written under ``staging``."""
    ops: list[Op] = []
    made_dirs: set[str] = set()
    make_scratch(staging, staging.parent, intent)
    dir_mode = stat.S_IMODE(os.stat(staging).st_mode)  # 0o777 less the umask, as mkdir -p

    def make_parents(rel: str) -> None:
        head = rel
        while "/" in head:  # missing directories above it, made by the commit
            head = head.rsplit("/", 1)[0]
            if head in made_dirs or head in dirs or lstat_or_none(parent_root / head) is not None:
                break
            made_dirs.add(head)
            ops.append(Op("mkdir", head, mode=dir_mode))

    for rel in sorted(dirs):
        st = lstat_or_none(parent_root / rel)
        mode = stat.S_IMODE(dirs[rel])
        if st is not None and stat.S_ISDIR(st.st_mode):
            if stat.S_IMODE(st.st_mode) != mode:
                ops.append(Op("chmod", rel, mode=mode))
            continue
        if st is not None:
            ops.append(Op("delete", rel))
        make_parents(rel)
        ops.append(Op("mkdir", rel, mode=mode))
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
        make_parents(rel)
        staged = staging / str(index)
        if content.link is not None:
            os.symlink(content.link, staged)
        elif content.source is not None:
            _copy_source(rel, content.source, staged, content.root or source_root)
        else:
            staged.write_bytes(content.data or b"")
            if content.mode is not None:
                os.chmod(staged, stat.S_IMODE(content.mode))
            elif st is not None and stat.S_ISREG(st.st_mode):
                os.chmod(staged, stat.S_IMODE(st.st_mode))
        was_there = st is not None or rel in existed
        ops.append(Op("put", rel, source=str(staged), existed=was_there))
    return ops


def _copy_source(rel: str, source: Path | str, staged: Path, source_root: Path | None) -> None:
    """Copy one source (a regular file with its mode, or a symlink as a symlink) to
    ``staged``, never following a link on the way (below ``source_root`` when given) nor
    at the source itself, and never opening a FIFO or device for reading."""
    if source_root is not None:
        dir_parts, name = str(source).rsplit("/", 1) if "/" in str(source) else ("", str(source))
        opener = beneath.open_dir(source_root, dir_parts)
    else:
        path = Path(source)
        name = path.name
        opener = beneath.open_dir(path.parent, "")
    with opener as dfd:
        st = os.lstat(name, dir_fd=dfd)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=dfd), staged)
            return
        odd = special_kind(st.st_mode)
        if odd is not None or stat.S_ISDIR(st.st_mode):
            raise UnsafeChangeError(
                f"{rel}: {odd or 'a directory'} (only files and symlinks are copied; "
                "nothing was applied)",
                [rel],
            )
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
        try:
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode):
                raise UnsafeChangeError(f"{rel}: not a regular file; nothing was applied", [rel])
            out = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                with contextlib.suppress(OSError):
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
                while chunk := os.read(fd, 1 << 20):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(out, view) :]
                os.fchmod(out, stat.S_IMODE(fst.st_mode))
            finally:
                os.close(out)
        finally:
            os.close(fd)


def _publish(journal: Journal, store: Store, label: str) -> None:
    """The commit point and after: as ``Branch._publish``, without a branch to keep."""
    set_generation = store.set_generation
    with deferred_signals():
        held = journal.reach_commit_point(lambda: None, f"cannot land {label}")
        outcome = journal.run(set_generation, first=True)
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


__all__ = ["NewFile", "branch_files", "land_files"]
