"""Combine instead of pick: ``merge_or_select("combine", selection={...})``.

Why: often branch A fixed the parser and branch B wrote the better tests. Picking one loses
the other's work; combining takes, per path, one branch's version (or the parent's), and
within a text file, per hunk, the changes the user chose.

``selection`` maps a path to

* a branch label (that branch's version of the file: its bytes and mode, a symlink as a
  symlink, or the file's absence when the branch deleted it), or ``"parent"`` (leave the
  parent's version);
* a list of hunk choices: ``"label:3"``, ``("label", 3)`` or ``{"branch": "label",
  "hunk": 3}``. Hunks are numbered per branch and path as :func:`hunks_of` (difflib, the
  parent's text against the branch's) lists them, so a UI shows exactly these.

All or nothing: the whole selection is planned first (:func:`plan_combination`, no side
effects; a UI shows it as the running "combined result"). Two chosen hunks that overlap in
the parent's text (or insert at the same place) are a conflict; a path the parent changed
since the fork is a conflict; a binary file chosen per hunk is refused (it can be chosen
per file). Any of these raises before anything is written. Otherwise the result lands in
ONE journaled commit of the workspace layer (``workspace.land.land_files``: the new files
are staged beside the parent and published by the same commit engine as a branch's, so a
crash leaves the old parent or the new one), then the fork's branches are discarded. No
intermediate branch is made: on the copy backend that was a full copy of the tree, on
overlay a copy-up per file, plus two diffs of it (most of the combine's cost). The merged
history is the base branch's (``base=``, default: the branch most paths were taken from)
plus a note telling the model what came from where.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import os
import stat
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from branching_core.errors import (
    BranchingError,
    ConflictError,
    InvalidStateError,
    UnsafeChangeError,
)
from branching_core.fork.history import dumps_history
from branching_core.fork.state import Resolution
from branching_core.fork.types import MergeResult
from branching_core.workspace import beneath
from branching_core.workspace.apply import change_ops
from branching_core.workspace.changes import find_conflicts
from branching_core.workspace.land import NewFile, land_files
from branching_core.workspace.paths import path_problem

if TYPE_CHECKING:
    from branching_core.fork.merge import ForkMerger

PARENT = "parent"
HunkChoice = str | tuple[str, int] | Mapping[str, Any]
Selection = Mapping[str, str | Sequence[HunkChoice]]


class CombineError(BranchingError, ValueError):
    """The selection cannot be applied as asked (bad path, label, hunk, binary per hunk)."""


class CombineConflict(CombineError):
    """Chosen changes collide (overlapping hunks, or the parent changed since the fork);
    nothing was applied. ``conflicts`` holds one line per collision."""

    def __init__(self, conflicts: list[str]) -> None:
        self.conflicts = conflicts
        super().__init__(f"{len(conflicts)} conflict(s), nothing applied: " + "; ".join(conflicts))


@dataclass(frozen=True)
class Hunk:
    """One change of a branch against the parent: parent lines ``[start, end)`` become
    ``lines`` (an insertion has ``start == end``)."""

    label: str
    index: int
    start: int
    end: int
    lines: tuple[str, ...]

    def overlaps(self, other: Hunk) -> bool:
        if self.start == self.end and other.start == other.end:
            return self.start == other.start  # two insertions at one place: order unknown
        if self.start == self.end:
            return other.start < self.start < other.end
        if other.start == other.end:
            return self.start < other.start < self.end
        return self.start < other.end and other.start < self.end


@dataclass
class PathPlan:
    """What the combined result does to one path."""

    path: str
    action: Literal["write", "copy", "delete", "keep"]
    data: bytes | None = None
    source: Path | None = None
    """``copy``: the branch's file (copied with its mode; a symlink is recreated)."""
    root: Path | None = None
    """``copy``: the branch's root, below which ``path`` is read without following links."""
    taken: list[str] = field(default_factory=list)
    """Where the content came from: ``["a"]`` or ``["a#0", "b#2"]``."""


@dataclass
class CombinePlan:
    """The planned combination; ``base_label`` gives the merged history."""

    paths: list[PathPlan]
    base_label: str

    def note(self) -> str:
        """What the model is told after the merge."""
        lines = [
            "The fork was merged by combining branches (base history: "
            f"{self.base_label}). Taken into the workspace:"
        ]
        for p in self.paths:
            if p.action == "keep":
                lines.append(f"- {p.path}: the parent's version (branches' changes dropped)")
            elif p.action == "delete":
                lines.append(f"- {p.path}: deleted, as in {', '.join(p.taken)}")
            elif len(p.taken) == 1 and "#" not in p.taken[0]:
                lines.append(f"- {p.path}: from {p.taken[0]}")
            else:
                lines.append(f"- {p.path}: hunks {', '.join(p.taken)}")
        return "\n".join(lines)


def _is_text(data: bytes) -> bool:
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _lstat(root: Path, rel: str, where: str) -> os.stat_result | None:
    """What ``rel`` is in ``root`` (a branch view or the parent), found without following
    any link on the way: a path below a symlink is refused, the link is chosen itself."""
    try:
        return beneath.lstat(root, rel)
    except UnsafeChangeError as exc:
        raise CombineError(
            f"{exc} in {where}: choose the link itself (a link is combined as a link)"
        ) from None


def _read(root: Path, rel: str, where: str) -> bytes | None:
    """A regular file's bytes; ``None`` when absent. Refuses directories and links, and
    paths below a link."""
    st = _lstat(root, rel, where)
    if st is None:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise CombineError(f"{PurePosixPath(rel).name}: not a regular file; choose it per file")
    return beneath.read_bytes(root, rel)


def hunks_of(label: str, parent: bytes | None, branch: bytes | None) -> list[Hunk]:
    """The branch's changes to one text file, numbered from 0 (difflib opcodes)."""
    for data in (parent, branch):
        if data is not None and not _is_text(data):
            raise CombineError("binary file: it can be chosen per file, not per hunk")
    a = (parent or b"").decode("utf-8").splitlines(keepends=True)
    b = (branch or b"").decode("utf-8").splitlines(keepends=True)
    out = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            out.append(Hunk(label, len(out), i1, i2, tuple(b[j1:j2])))
    return out


def _check_path(rel: str) -> str:
    reason = path_problem(rel)
    if reason is not None:
        raise CombineError(f"not a path inside the workspace: {reason}")
    return rel


def _choice(choice: HunkChoice) -> tuple[str, int]:
    if isinstance(choice, str):
        label, sep, index = choice.rpartition(":")
        if not sep:
            raise CombineError(f"hunk choice {choice!r}: write it as 'label:index'")
    elif isinstance(choice, Mapping):
        label, index = choice.get("branch", ""), choice.get("hunk", "")
    else:
        label, index = choice
    try:
        return str(label), int(index)
    except (TypeError, ValueError):
        raise CombineError(f"hunk choice {choice!r}: the hunk index is not a number") from None


class _Sources:
    """Label -> branch directory, for the branches that still have files."""

    def __init__(self, coordinator: Any) -> None:
        self.parent = Path(coordinator.parent_path)
        self.dirs: dict[str, Path] = {}
        self.runtimes: dict[str, Any] = {}
        for rt in coordinator.branches.values():
            if rt.ws_branch is not None:
                self.dirs[rt.label] = Path(rt.ws_branch.path)
                self.runtimes[rt.label] = rt

    def dir(self, label: str) -> Path:
        if label not in self.dirs:
            known = ", ".join(sorted(self.dirs)) or "none"
            raise CombineError(f"no branch {label!r} with files to take from (branches: {known})")
        return self.dirs[label]


def branch_hunks(coordinator: Any, path: str) -> dict[str, list[Hunk]]:
    """Every branch's hunks for ``path``, numbered as a selection names them (for a UI's
    "take this hunk" key). Branches that did not change the path have none; a binary
    file raises ``CombineError`` (choose it per file)."""
    rel = _check_path(path)
    src = _Sources(coordinator)
    parent = _read(src.parent, rel, PARENT)
    out: dict[str, list[Hunk]] = {}
    for label, directory in src.dirs.items():
        try:
            out[label] = hunks_of(label, parent, _read(directory, rel, label))
        except CombineError as exc:
            raise CombineError(f"{rel}: {exc}") from None
    return out


def _plan_hunks(
    rel: str, choices: Sequence[HunkChoice], src: _Sources
) -> tuple[PathPlan, list[str]]:
    parent_data = _read(src.parent, rel, PARENT)
    cache: dict[str, list[Hunk]] = {}
    chosen: list[Hunk] = []
    for choice in choices:
        label, index = _choice(choice)
        if label not in cache:
            try:
                cache[label] = hunks_of(
                    label, parent_data, _read(src.dir(label), rel, label)
                )
            except CombineError as exc:
                raise CombineError(f"{rel}: {exc}") from None
        hunks = cache[label]
        if not 0 <= index < len(hunks):
            raise CombineError(f"{rel}: {label} has {len(hunks)} hunk(s), no hunk {index}")
        if hunks[index] not in chosen:
            chosen.append(hunks[index])
    conflicts = []
    unique: list[Hunk] = []
    for h in sorted(chosen, key=lambda h: (h.start, h.end, h.label)):
        same = next(
            (u for u in unique if (u.start, u.end, u.lines) == (h.start, h.end, h.lines)), None
        )
        if same is not None:
            continue  # the same change chosen from two branches: take it once
        for u in unique:
            if u.overlaps(h):
                conflicts.append(
                    f"{rel}: hunk {u.label}#{u.index} (lines {u.start + 1}-{u.end}) overlaps "
                    f"hunk {h.label}#{h.index} (lines {h.start + 1}-{h.end})"
                )
        unique.append(h)
    parent_lines = (parent_data or b"").decode("utf-8").splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    for h in unique:
        out.extend(parent_lines[pos : h.start])
        out.extend(h.lines)
        pos = max(pos, h.end)
    out.extend(parent_lines[pos:])
    taken = [f"{h.label}#{h.index}" for h in unique]
    return PathPlan(rel, "write", "".join(out).encode("utf-8"), taken=taken), conflicts


def plan_combination(
    coordinator: Any, selection: Selection, *, base: str | None = None
) -> CombinePlan:
    """Plan ``selection`` against the fork's branches (reads files, writes nothing).

    Raises ``CombineError`` for a bad selection and ``CombineConflict`` (listing every
    collision) when chosen hunks overlap."""
    if not selection:
        raise CombineError("the selection is empty: choose at least one path")
    src = _Sources(coordinator)
    plans: list[PathPlan] = []
    conflicts: list[str] = []
    for raw, choice in selection.items():
        rel = _check_path(str(raw))
        if isinstance(choice, str):
            label = choice.strip()
            if label == PARENT:
                plans.append(PathPlan(rel, "keep", taken=[PARENT]))
                continue
            root = src.dir(label)
            st = _lstat(root, rel, label)
            if st is not None:
                if stat.S_ISDIR(st.st_mode):
                    raise CombineError(f"{rel}: a directory; choose the files in it")
                plans.append(
                    PathPlan(rel, "copy", source=root / rel, root=root, taken=[label])
                )
            elif _lstat(src.parent, rel, PARENT) is not None:
                plans.append(PathPlan(rel, "delete", taken=[label]))
            else:
                raise CombineError(f"{rel}: neither {label} nor the parent has this path")
        elif isinstance(choice, Sequence) and choice:
            plan, found = _plan_hunks(rel, choice, src)
            plans.append(plan)
            conflicts.extend(found)
        else:
            raise CombineError(f"{rel}: choose a branch label, 'parent', or a list of hunks")
    if conflicts:
        raise CombineConflict(conflicts)
    if base is None:
        counts = Counter(t.split("#")[0] for p in plans for t in p.taken if t != PARENT)
        order = list(src.dirs)
        base = max(counts, key=lambda b: (counts[b], -order.index(b))) if counts else order[0]
    src.dir(base)
    return CombinePlan(plans, base)


def _new_files(plan: CombinePlan) -> dict[str, NewFile | None]:
    """What lands where: a branch's file (bytes, mode; a symlink as a symlink), planned
    bytes (hunks), or nothing (a deletion); kept paths are left out."""
    out: dict[str, NewFile | None] = {}
    for p in plan.paths:
        if p.action == "delete":
            out[p.path] = None
        elif p.action == "copy":
            # read below the branch's root without following a link (not via ``source``)
            out[p.path] = NewFile(source=p.path, root=p.root)
        elif p.action == "write":
            out[p.path] = NewFile(data=p.data)
    return out


def _lost_in_parent(branches: list[Any]) -> set[str]:
    """Paths some branch writes that the parent held at the fork and no longer has
    (``lost_in_parent`` of each branch's changes: it modified them, or cannot tell and the
    parent's side says they may have been there). Taken into the combination, such a path
    is a deletion meanwhile, a conflict: never a file to create."""
    lost: set[str] = set()
    for branch in branches:
        lost.update(getattr(branch.changes(), "lost_in_parent", ()))
    return lost


def _parent_changed(
    plan: CombinePlan, parent: Path, since_ns: int, existed: set[str]
) -> list[str]:
    """The plan's paths the parent changed since the fork, by the one conflict rule of every
    landing (``workspace.changes.find_conflicts``, through ``apply.change_ops``);
    ``existed``: see :func:`_lost_in_parent`."""
    ops = change_ops(
        written=[p.path for p in plan.paths if p.action in ("copy", "write")],
        existed=existed,
        deleted=[p.path for p in plan.paths if p.action == "delete"],
    )
    return [f"{rel}: changed in the parent since the fork" for rel in
            find_conflicts(ops, parent, since_ns)]


async def merge_combined(
    merger: ForkMerger, selection: Selection | None = None, *, base: str | None = None
) -> MergeResult:
    """Apply ``selection`` to the parent in one commit and settle the fork (module doc).

    Raises ``CombineError``/``CombineConflict`` (the fork stays open, nothing written),
    ``RuntimeError`` when the fork is already resolved."""
    from branching_core.workspace.landing import landing_lock

    state, fc = merger.state, merger.fc
    async with state.lock:
        handle = state.require_open()
        branches = list(state.branches.values())
        for rt in branches:
            if rt.task is not None and not rt.task.done():
                if rt.task is asyncio.current_task():
                    raise InvalidStateError("a branch cannot merge the fork it runs in")
                await asyncio.wait([rt.task])
        plan = await asyncio.to_thread(plan_combination, fc, selection or {}, base=base)
        open_branches = [rt.ws_branch for rt in branches if rt.ws_branch is not None]
        since = min((b.created_ns for b in open_branches), default=time.time_ns())
        parent_dir = Path(fc.parent_path)
        existed = await asyncio.to_thread(_lost_in_parent, open_branches)
        stale = await asyncio.to_thread(_parent_changed, plan, parent_dir, since, existed)
        if stale:
            raise CombineConflict(stale)
        touched = [p.path for p in plan.paths if p.action != "keep"]
        # the one landing lock per parent path, shared with fork merges and sub-agents
        async with landing_lock(fc.parent_node):
            held = None
            try:
                # the pre-merge files (for rewind) are held open while the result lands;
                # their copies are made after the commit, off the event loop
                held = await asyncio.to_thread(
                    fc.checkpoints.hold_files, handle.fork_id, "fork", parent_dir, touched
                )
                # staged and committed in one journaled commit, no intermediate branch
                changes = await asyncio.to_thread(
                    land_files,
                    fc.parent_node,
                    _new_files(plan),
                    since_ns=since,
                    label=f"the combination of fork {handle.fork_id}",
                    existed=existed,
                )
            except ConflictError as exc:  # the parent changed between plan and commit
                if held is not None:
                    with contextlib.suppress(Exception):
                        held.finish()
                raise CombineConflict(
                    [f"{p}: changed in the parent during the merge" for p in exc.paths]
                    or [str(exc)]
                ) from exc
            except BaseException:
                if held is not None:
                    with contextlib.suppress(Exception):
                        held.finish()  # what the parent held before is still worth keeping
                raise
        merger.record_post_fork(handle.fork_id, parent_dir, touched, held)
        winner = next(rt for rt in branches if rt.label == plan.base_label)
        await asyncio.gather(*(merger.discard(rt) for rt in branches))
        discarded = [rt.branch_id for rt in branches if rt is not winner]
        history: list[ModelMessage] = list(winner.partial_history or winner.seed_history)
        history.append(ModelRequest(parts=[UserPromptPart(plan.note())]))
        # file writes with fsync: in a worker thread, as a pick does (never on the loop)
        post_id = await asyncio.to_thread(
            fc.checkpoints.save,
            handle.fork_id,
            "post-fork",
            dumps_history(history),
            parent_workspace_branch_id=merger.parent_ws_id,
        )
        winner.resolution = "merged"
        await state.settle(
            Resolution("combine", winner.branch_id),
            discarded=discarded,
            post_checkpoint=post_id,
        )
        return MergeResult(
            fork_id=handle.fork_id,
            action="combine",
            winner_branch_id=winner.branch_id,
            winner_label=winner.label,
            winner_state=winner.state,
            applied_paths=sorted({*changes.created, *changes.modified}),
            applied_changes=len(changes.all_paths),
            deleted_paths=list(changes.deleted),
            history_after_merge=history,
            discarded_branch_ids=discarded,
            partial=winner.state != "done",
            pre_fork_checkpoint_id=handle.parent_checkpoint_id,
            post_fork_checkpoint_id=post_id,
        )


__all__ = [
    "PARENT",
    "CombineConflict",
    "CombineError",
    "CombinePlan",
    "Hunk",
    "PathPlan",
    "branch_hunks",
    "hunks_of",
    "merge_combined",
    "plan_combination",
]
