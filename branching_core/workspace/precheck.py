"""Will every operation of a commit succeed? Checked before the commit point.

A commit that fails half way has to be rolled back, so the failures that can be
foreseen are refused up front, while nothing has been touched:

* structural conflicts: a third party removed the directory a new file goes into, or
  turned a file the branch modified into a directory (or the other way round). The
  parent is replayed op by op on a small model of what each path will be, so the
  rename that would fail with ENOENT/EISDIR/ENOTDIR is found without doing it;
* permissions: a directory whose entries change must be writable and searchable by
  this process, a directory that moves must be writable itself (its ``..`` changes),
  a mode change needs ownership, and a sticky directory only lets owners rename.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from branching_core.errors import CommitError, ConflictError
from branching_core.workspace.changes import Op, RemovalRecord, find_conflicts, ordered
from branching_core.workspace.fsutil import PROJECT_STATE_DIR

Kind = Literal["d", "f"] | None


def refuse_unapplicable(
    ops: list[Op],
    parent_root: Path,
    *,
    since_ns: int | None,
    parent_name: str,
    since: str,
    cannot: str,
    root_names: frozenset[str] | None = None,
    landings: RemovalRecord | None = None,
) -> None:
    """Refuse, before the commit point, every op that would make a commit fail half way.

    Shared by ``Branch.commit`` and ``land_files`` (one rule for both). Raises
    ``ConflictError`` naming the paths the parent changed after ``since_ns`` (``since``
    says when that was, e.g. "x was created"; None when the caller checked against its own
    record, e.g. a Ray snapshot's manifest) or cannot take, then ``CommitError`` for
    paths this process may not write (``cannot`` is what was refused, e.g. "commit x").
    """
    stats = ParentStats(parent_root)  # one lstat per parent path for all three checks
    changed = (
        []
        if since_ns is None
        else find_conflicts(
            ops, parent_root, since_ns, root_names, stat_of=stats.get, landings=landings
        )
    )
    conflicts = sorted({*changed, *structural_conflicts(ops, parent_root, stats)})
    if conflicts:
        raise ConflictError(
            f"{len(conflicts)} path(s) changed in {parent_name} since {since}: {_shown(conflicts)}",
            conflicts,
        )
    denied = unwritable(ops, parent_root, stats)
    if denied:
        raise CommitError(
            f"cannot {cannot}: permission denied in {parent_name} for {_shown(denied)}; "
            "nothing was applied"
        )


def _shown(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (" ..." if len(paths) > 5 else "")


class ParentStats:
    """``lstat`` of parent paths (relative; "" is the root), each taken once per check.

    Why: the conflict, structural and permission checks each looked at every target and
    its directory again (~5 ``lstat``s and path joins per changed file); they all judge the
    parent as it is at this one moment, so one look per path serves them all."""

    def __init__(self, root: Path) -> None:
        self._root = str(root)
        self._seen: dict[str, os.stat_result | None] = {}

    def get(self, rel: str) -> os.stat_result | None:
        try:
            return self._seen[rel]
        except KeyError:
            pass
        try:
            st: os.stat_result | None = os.lstat(f"{self._root}/{rel}" if rel else self._root)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        self._seen[rel] = st
        return st


class _Model:
    """What each path of the parent will be after the operations seen so far."""

    def __init__(self, root: Path, stats: ParentStats | None = None) -> None:
        self.root = root
        self.stats = stats or ParentStats(root)
        self.changed: dict[str, Kind] = {}

    def kind(self, rel: str) -> Kind:
        if rel in self.changed:
            return self.changed[rel]
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            ancestor = "/".join(parts[:depth])
            if ancestor in self.changed and self.changed[ancestor] != "d":
                return None  # deleted, or replaced by a file
        st = self.stats.get(rel)
        if st is None:
            return None
        return "d" if stat.S_ISDIR(st.st_mode) else "f"

    def parent_kind(self, rel: str) -> Kind:
        return "d" if "/" not in rel else self.kind(rel.rsplit("/", 1)[0])


def structural_conflicts(
    ops: Iterable[Op], parent_root: Path, stats: ParentStats | None = None
) -> list[str]:
    """Paths whose operation cannot apply to the parent as it is now."""
    model = _Model(parent_root, stats)
    conflicts: list[str] = []
    for op in ordered(ops):
        if op.kind == "delete":
            model.changed[op.path] = None
        elif op.kind == "mkdir":
            if model.parent_kind(op.path) != "d" or model.kind(op.path) == "f":
                conflicts.append(op.path)
            model.changed[op.path] = "d"
        elif op.kind == "put":
            target = model.kind(op.path)
            if (
                model.parent_kind(op.path) != "d"
                or target == "d"
                or (op.tree and target is not None)
            ):
                conflicts.append(op.path)
            model.changed[op.path] = "d" if op.tree else "f"
    return sorted(set(conflicts))


def _writable(path: Path) -> bool:
    effective = os.access in os.supports_effective_ids
    return os.access(path, os.W_OK | os.X_OK, effective_ids=effective)


def unwritable(
    ops: Iterable[Op], parent_root: Path, stats: ParentStats | None = None
) -> list[str]:
    """Parent paths this process may not change, for the operations that change them."""
    stats = stats or ParentStats(parent_root)
    euid = os.geteuid()
    bad: set[str] = set()
    checked: dict[str, bool] = {}
    needs_scratch = False

    ops = list(ops)
    made = {op.path for op in ops if op.kind == "mkdir"}

    def dir_ok(rel_dir: str) -> bool:
        if rel_dir not in checked:
            full = parent_root / rel_dir if rel_dir else parent_root
            st = stats.get(rel_dir)
            # missing, or a file this commit replaces by a directory it makes (ours)
            replaced = rel_dir in made and st is not None and not stat.S_ISDIR(st.st_mode)
            checked[rel_dir] = st is None or replaced or _writable(full)
        return checked[rel_dir]

    for op in ops:
        rel_dir = op.path.rsplit("/", 1)[0] if "/" in op.path else ""
        st = stats.get(op.path)
        if op.kind in ("delete", "put", "mkdir") and not dir_ok(rel_dir):
            bad.add(rel_dir or ".")
        if st is None:
            continue
        if op.kind in ("delete", "put"):
            needs_scratch = True  # what is displaced goes to the commit's scratch
            moves_dir = op.kind == "delete" and stat.S_ISDIR(st.st_mode)
            if moves_dir and euid != 0 and not _writable(parent_root / op.path):
                bad.add(op.path)  # moving a directory rewrites its ".."
            dir_st = stats.get(rel_dir)
            if (
                euid != 0
                and dir_st is not None
                and dir_st.st_mode & stat.S_ISVTX
                and euid not in (st.st_uid, dir_st.st_uid)
            ):
                bad.add(op.path)  # sticky directory: only owners rename
        if (
            op.kind in ("chmod", "mkdir")
            and op.mode is not None
            and euid not in (0, st.st_uid)
            and stat.S_IMODE(st.st_mode) != op.mode
        ):
            bad.add(op.path)
    if needs_scratch:
        state = parent_root / PROJECT_STATE_DIR
        scratch_parent = state / "commit" if (state / "commit").exists() else state
        if not (scratch_parent.exists() and _writable(scratch_parent)) and not (
            not scratch_parent.exists() and dir_ok("")
        ):
            bad.add(str(scratch_parent.relative_to(parent_root)))
    return sorted(bad)


__all__ = ["ParentStats", "structural_conflicts", "unwritable"]
