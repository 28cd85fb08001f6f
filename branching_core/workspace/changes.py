"""What a branch changed, as an ordered list of operations on its parent.

Backends describe a branch's changes as ``Op``s (delete, mkdir, put, chmod) relative
to the parent's view; the commit engine checks them for conflicts and journals them;
``BranchChanges`` is the public, file-level summary of the same list.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from branching_core.workspace.fsutil import lstat_or_none
from branching_core.workspace.paths import GIT_NAME, is_internal_path

OpKind = Literal["delete", "mkdir", "put", "chmod"]
_ORDER: dict[str, int] = {"delete": 0, "mkdir": 1, "put": 2, "chmod": 3}


@dataclass(frozen=True)
class Op:
    """One step of a commit: ``path`` is relative to the parent's view."""

    kind: OpKind
    path: str
    source: str | None = None  # put: absolute path of the new file, symlink or directory
    tree: bool = False  # put: ``source`` is a whole directory moved in one rename
    mode: int | None = None  # mkdir/chmod: permission bits
    # put: this path was (True) or was not (False) in the parent when the branch was made;
    # None when the backend cannot tell (overlay: a file renamed over one of the parent's
    # looks exactly like a new one), and the parent's side decides (find_conflicts)
    existed: bool | None = None
    copied_up: bool = False  # put: overlay copied this file up from a lower layer (maybe renamed)
    strip_xattrs: bool = False  # put: drop overlayfs bookkeeping after the move

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v is not None and v is not False}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Op:
        return cls(**data)


def ordered(ops: Iterable[Op]) -> list[Op]:
    """Deletes first, then directories top-down, then files, then directory modes bottom-up."""

    def key(op: Op) -> tuple[int, int, str]:
        depth = op.path.count("/")
        if op.kind == "chmod":
            depth = -depth
        return (_ORDER[op.kind], depth, op.path)

    return sorted(ops, key=key)


@dataclass
class BranchChanges:
    """Paths (relative, POSIX) a branch created, modified or deleted, relative to its parent."""

    created: list[str] = field(default_factory=list[str])
    modified: list[str] = field(default_factory=list[str])
    deleted: list[str] = field(default_factory=list[str])
    # Paths the branch writes that someone else removed from the parent since the branch
    # was made (or, on overlay, may have: see find_conflicts), or whose directory is gone:
    # applying them path by path would resurrect what a third party deleted.
    lost_in_parent: list[str] = field(default_factory=list[str], compare=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.created or self.modified or self.deleted)

    @property
    def all_paths(self) -> list[str]:
        return sorted({*self.created, *self.modified, *self.deleted})


def without_internal(ops: Iterable[Op]) -> list[Op]:
    """``ops`` with nothing of :func:`~branching_core.workspace.paths.is_internal_path`.

    The backends' scans already skip ``.git`` and the state dir; what is left is a whole
    new directory published by one rename (a tree put) that holds a ``.git`` somewhere
    (a repository cloned or ``git init``-ed inside the branch): it is split into a mkdir
    and puts of its entries, down to the ``.git``, which stays behind with the branch.
    """
    out: list[Op] = []
    for op in ops:
        if is_internal_path(op.path):
            continue
        if op.kind == "put" and op.tree and op.source and _holds_git(Path(op.source)):
            out.extend(_split_tree(op, Path(op.source), op.path))
        else:
            out.append(op)
    return out


def _holds_git(root: Path) -> bool:
    for _dirpath, dirnames, filenames in os.walk(root):
        if GIT_NAME in dirnames or GIT_NAME in filenames:
            return True
    return False


def _split_tree(op: Op, source: Path, rel: str) -> list[Op]:
    ops = [Op("mkdir", rel, mode=stat.S_IMODE(os.lstat(source).st_mode))]
    with os.scandir(source) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name == GIT_NAME:
                continue
            child, child_rel = Path(entry.path), f"{rel}/{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                if _holds_git(child):
                    ops.extend(_split_tree(op, child, child_rel))
                else:
                    ops.append(replace(op, path=child_rel, source=str(child), existed=False))
            else:
                ops.append(
                    replace(op, path=child_rel, source=str(child), tree=False, existed=False)
                )
    return ops


def summarize(ops: Iterable[Op], parent_root: Path) -> BranchChanges:
    """File-level summary of ``ops``: trees are expanded, replacements count as modified."""
    created: set[str] = set()
    modified: set[str] = set()
    deleted: set[str] = set()
    for op in ops:
        if op.kind == "delete":
            deleted.add(op.path)
        elif op.kind == "mkdir":
            if lstat_or_none(parent_root / op.path) is None:
                created.add(op.path)
        elif op.kind == "put":
            if op.tree and op.source:
                created.add(op.path)
                for rel in _walk_relative(Path(op.source)):
                    created.add(f"{op.path}/{rel}")
            else:
                created.add(op.path)
        elif op.kind == "chmod":
            modified.add(op.path)
    # A path deleted and put again (type change, replaced directory) was modified.
    for path in list(deleted & created):
        deleted.discard(path)
        created.discard(path)
        modified.add(path)
    # A put over an existing parent entry is a modification, not a creation.
    for path in list(created):
        if path not in modified and lstat_or_none(parent_root / path) is not None:
            created.discard(path)
            modified.add(path)
    return BranchChanges(sorted(created), sorted(modified), sorted(deleted))


def _walk_relative(root: Path) -> Iterable[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            yield name if rel_dir == "." else f"{rel_dir}/{name}"


class RemovalRecord(Protocol):
    """The parent's record of what its landings removed (``workspace.landed``)."""

    def removed_since(self, rel: str, dir_ctime_ns: int, since_ns: int) -> bool | None: ...


def held_at_fork(changes: Any) -> set[str]:
    """The paths a branch writes that its parent held when it was made: those it modified,
    and those it writes that the parent has lost since (``lost_in_parent``). Landed path
    by path, these are ``existed``: one the parent deleted meanwhile is a conflict, not a
    file to create. ``changes``: a ``BranchChanges``, or any value with ``modified`` (a
    remote branch's)."""
    return {*changes.modified, *getattr(changes, "lost_in_parent", ())}


def find_conflicts(
    ops: Iterable[Op],
    parent_root: Path,
    created_ns: int,
    root_names: frozenset[str] | None = None,
    *,
    stat_of: Callable[[str], os.stat_result | None] | None = None,
    landings: RemovalRecord | None = None,
) -> list[str]:
    """Paths this branch changed that the parent also changed after ``created_ns``.

    ``stat_of`` (relative path -> its ``lstat`` in the parent, or None): a cache the
    caller shares with its other checks (``precheck.ParentStats``).

    The parent's change time (ctime, which no program can set back) is compared with
    the branch's creation time: a path the branch changed whose parent entry changed
    since is a conflict, whoever changed either side and however. A path the branch
    writes that is now missing from the parent is a conflict when the parent held it at
    the fork (someone deleted or renamed it away since; landing it would bring it back):
    certain when the branch knows it existed (``existed`` True); when it cannot know
    (``existed`` None: overlay, where a file renamed over one of the parent's, as every
    editor, ``sed -i`` and agent CLI saves, looks exactly like a new one), the parent's
    side decides: ``root_names`` (its top-level names at the fork) at the top level;
    below it, nothing was removed from a directory whose ctime is older than the fork,
    and for one changed since, ``landings`` (``workspace.landed``: what forkdeck's own
    landings into this parent removed) answers exactly when every change to it was one
    of them (siblings adding files beside each other never conflict); after a change
    nobody recorded (by hand, or by a program run in the parent) only a copied-up file
    counts as perhaps there (a file the branch renamed over one the parent then deleted
    by hand is not seen: see ``_may_have_existed``). Known limit: file timestamps
    come from the kernel's coarse clock (one tick, 4 ms at HZ=250), so a parent change
    within one tick after the branch was created can go unseen.
    """
    conflicts: list[str] = []
    for op in ops:
        if op.kind == "chmod":
            continue
        st = stat_of(op.path) if stat_of is not None else lstat_or_none(parent_root / op.path)
        if op.kind == "mkdir":
            if st is not None and not stat.S_ISDIR(st.st_mode) and st.st_ctime_ns > created_ns:
                conflicts.append(op.path)
            continue
        if st is None:
            # Gone from the parent: certainly deleted by someone else when the branch
            # knows it existed; when it cannot know (``existed`` None: overlay keeps no
            # list of what the parent held), any entry removed from or added to that
            # directory since the branch was made may have been this one.
            if op.kind == "put" and (
                op.existed
                or (
                    op.existed is None
                    and _may_have_existed(
                        op.path, parent_root / op.path, created_ns, root_names, landings,
                        unrecorded=op.copied_up,
                    )
                )
            ):
                conflicts.append(op.path)
            continue
        if stat.S_ISDIR(st.st_mode):
            if op.kind == "delete" or op.tree:
                changed = _changed_in_tree(parent_root / op.path, created_ns)
                conflicts.extend(f"{op.path}/{rel}" for rel in changed)
                if not changed and st.st_ctime_ns > created_ns:
                    conflicts.append(op.path)  # made, emptied or renamed into place since
            # a plain put over a directory is preceded by a delete op that checks it
        elif st.st_ctime_ns > created_ns:
            conflicts.append(op.path)
    return sorted(set(conflicts))


def lost_in_parent(
    ops: Iterable[Op],
    parent_root: Path,
    created_ns: int,
    root_names: frozenset[str] | None = None,
    landings: RemovalRecord | None = None,
) -> list[str]:
    """Puts whose path is now missing from the parent and was (or may have been) there
    when the branch was made, or whose directory the parent no longer has (the same
    judgement as :func:`find_conflicts`)."""
    lost: list[str] = []
    for op in ops:
        if op.kind != "put":
            continue
        target = parent_root / op.path
        if lstat_or_none(target) is not None:
            continue
        holder = lstat_or_none(target.parent)
        if (
            holder is None
            or not stat.S_ISDIR(holder.st_mode)
            or op.existed
            or (
                op.existed is None
                and _may_have_existed(
                    op.path, target, created_ns, root_names, landings, unrecorded=op.copied_up
                )
            )
        ):
            lost.append(op.path)
    return sorted(lost)


def _may_have_existed(
    rel: str,
    target: Path,
    created_ns: int,
    root_names: frozenset[str] | None,
    landings: RemovalRecord | None,
    *,
    unrecorded: bool,
) -> bool:
    """Was ``rel`` (missing from the parent now) perhaps in the parent at the fork?

    Exact at the top level (``root_names``). Below it: not if its directory has not lost
    or gained an entry since (ctime); else what the parent's record of its own landings
    says, when it accounts for every change to that directory; else (a change made by
    hand, or by any program outside forkdeck) ``unrecorded``: True for a file overlay
    copied up (it may have been renamed: main's rule before the record), False for a
    file with no trace of the parent (most likely one the branch created). Not True for
    every such file: any program run in the parent (``__pycache__``, a build, an
    editor's rename-on-save, ``git checkout``) changes its directories, and every file a
    branch added there would then be a conflict, not landed by a pick.
    """
    if "/" not in rel and root_names is not None:
        return rel in root_names
    st = lstat_or_none(target.parent)
    if st is None:
        return True
    if st.st_ctime_ns <= created_ns:
        return False
    if landings is not None:
        removed = landings.removed_since(rel, st.st_ctime_ns, created_ns)
        if removed is not None:
            return removed
    return unrecorded


def _changed_in_tree(root: Path, created_ns: int) -> list[str]:
    changed: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames + dirnames:
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                continue
            if st.st_ctime_ns > created_ns and not stat.S_ISDIR(st.st_mode):
                changed.append(name if rel_dir == "." else f"{rel_dir}/{name}")
    return changed
