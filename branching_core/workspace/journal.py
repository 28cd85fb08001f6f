# pyright: strict
"""Crash-safe commit: stage, journal the intent, publish by rename, forget the journal.

A commit is a list of ``Op``s applied to a parent directory. Everything the ops need is
staged on the parent's filesystem before the journal is written and fsynced; that
write is the commit point. Every op is idempotent, so a commit interrupted at any
instant (SIGKILL included) is rolled forward by replaying the journal when the
workspace is next opened, and one that never reached its journal left the parent
untouched. Either way the parent ends up exactly before or exactly after the commit.

Whatever an op replaces or removes is kept (hard link, or rename) in the commit's
scratch as ``displaced/<index>``, so a commit that fails for good half way (EIO,
ENOSPC, a permission the pre-check could not see) is rolled *back* instead: each
applied op is undone from what it displaced, newest first. A journal whose direction
is ``back`` is rolled back again by a replay, never forward.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from branching_core.errors import CommitError, PathNotFoundError
from branching_core.workspace import landed, reaper
from branching_core.workspace.changes import Op, ordered
from branching_core.workspace.faults import crash_point
from branching_core.workspace.fsutil import (
    PROJECT_STATE_DIR,
    lstat_or_none,
    read_json,
    remove_shallow_tree,
    rmtree,
    strip_overlay_xattrs,
    write_json_atomic,
)
from branching_core.workspace.treescan import remove_tree

log = logging.getLogger(__name__)
# from this many ops on, finish() removes the scratch with rm -rf (below, one unlink per
# entry in this thread is cheaper than a child's fork+exec+wait and holds the GIL as little)
EXTERNAL_REMOVE_OPS = 2000
# from this many displacing ops on (puts over existing paths, deletes), finish() hands the
# scratch to the background reaper instead of deleting it before the commit returns (below,
# removing a few entries here costs less than the reaper's rename and wake-up)
REAP_FROM_OPS = 8


def scratch_dir(parent_root: Path, commit_id: str) -> Path:
    """Staging and displaced entries live beside the parent's files, on its filesystem."""
    return parent_root / PROJECT_STATE_DIR / "commit" / commit_id


@dataclass
class Journal:
    path: Path
    commit_id: str
    parent_id: str
    parent_root: Path
    ops: list[Op]
    generation: int
    branch_id: str
    created_state_dir: bool = False
    # index -> what rollback restores: the previous mode (chmod/mkdir) or -1 when a
    # mkdir made the directory
    before: dict[int, int] = field(default_factory=dict[int, int])
    direction: str = "forward"

    # -- preparation -----------------------------------------------------------------
    @classmethod
    def prepare(
        cls,
        journal_dir: Path,
        commit_id: str,
        *,
        parent_id: str,
        parent_root: Path,
        ops: list[Op],
        generation: int,
        branch_id: str,
    ) -> Journal:
        """Stage sources that cannot be renamed into the parent; nothing is written yet.

        The commit point is :meth:`write`. A failure here leaves the parent untouched
        (the staging area is removed again).
        """
        scratch = scratch_dir(parent_root, commit_id)
        state_dir = parent_root / PROJECT_STATE_DIR
        created_state_dir = not state_dir.exists()
        intent = state_intent(journal_dir, commit_id) if created_state_dir else None
        staged_ops: list[Op] = []
        before: dict[int, int] = {}
        parent_dev = os.stat(parent_root).st_dev
        try:
            for index, op in enumerate(ordered(ops)):
                if op.kind in ("chmod", "mkdir"):
                    target_st = lstat_or_none(parent_root / op.path)
                    if target_st is None:
                        before[index] = -1
                    else:
                        before[index] = stat.S_IMODE(target_st.st_mode)
                if op.kind == "put" and op.source is not None:
                    source_dev = os.lstat(op.source).st_dev if op.tree else _dev_of(op.source)
                    if source_dev != parent_dev:
                        staged = scratch / "staged" / str(index)
                        if not staged.parent.exists():
                            make_scratch(staged.parent, scratch, intent)
                        _copy_entry(Path(op.source), staged)
                        op = replace(op, source=str(staged))
                staged_ops.append(op)
            crash_point("staged")
        except BaseException:
            rmtree(scratch)
            remove_empty_state_dirs(parent_root, remove_state_dir=created_state_dir,
                                     intent=intent)
            raise
        return cls(
            path=journal_dir / f"{commit_id}.json",
            commit_id=commit_id,
            parent_id=parent_id,
            parent_root=parent_root,
            ops=staged_ops,
            generation=generation,
            branch_id=branch_id,
            created_state_dir=created_state_dir,
            before=before,
        )

    @property
    def intent(self) -> Path | None:
        """The store's record that this commit makes ``.pydantic-deep`` (None: it existed)."""
        return state_intent(self.path.parent, self.commit_id) if self.created_state_dir else None

    def write(self) -> None:
        """The commit point: the journal is durable, the commit will happen."""
        write_json_atomic(self.path, self.to_json(), durable=True)
        crash_point("journaled")

    def reach_commit_point(self, undo: Callable[[], None], what: str) -> BaseException | None:
        """:meth:`write` for ``Branch.commit`` and ``land_files`` alike.

        When the journal is not there afterwards the commit point was not reached: the
        staging is discarded, ``undo()`` runs (a branch thaws) and the failure is raised
        (an ``OSError`` as ``CommitError("<what>: writing its journal failed ...")``).
        When it is, the commit goes on; an interruption that is not an ``OSError``
        (``KeyboardInterrupt``...) is returned, to be raised once the commit is finished.
        """
        try:
            self.write()
        except BaseException as exc:
            if isinstance(exc, OSError):
                # Not known to be durable: take the commit point back if we can.
                with contextlib.suppress(OSError):
                    self.path.unlink(missing_ok=True)
            if not self.path.exists():  # the commit point was not reached
                self.discard_staging()
                undo()
                if isinstance(exc, OSError):
                    raise CommitError(
                        f"{what}: writing its journal failed ({exc}); nothing was applied"
                    ) from exc
                raise
            if not isinstance(exc, OSError):
                return exc
        return None

    def discard_staging(self) -> None:
        """Undo :meth:`prepare` for a commit that never reached :meth:`write`."""
        rmtree(scratch_dir(self.parent_root, self.commit_id))
        remove_empty_state_dirs(self.parent_root, remove_state_dir=self.created_state_dir,
                                 intent=self.intent)

    def to_json(self) -> dict[str, object]:
        return {
            "commit_id": self.commit_id,
            "parent_id": self.parent_id,
            "parent_root": str(self.parent_root),
            "ops": [op.to_json() for op in self.ops],
            "generation": self.generation,
            "branch_id": self.branch_id,
            "created_state_dir": self.created_state_dir,
            "before": {str(k): v for k, v in self.before.items()},
            "direction": self.direction,
        }

    @classmethod
    def load(cls, path: Path, *, parent_root: Path | None = None) -> Journal:
        data: dict[str, Any] = read_json(path)
        before: dict[str, Any] = data.get("before") or {}
        return cls(
            path=path,
            commit_id=data["commit_id"],
            parent_id=data["parent_id"],
            parent_root=parent_root or Path(data["parent_root"]),
            ops=[Op.from_json(op) for op in data["ops"]],
            generation=int(data["generation"]),
            branch_id=data["branch_id"],
            created_state_dir=bool(data.get("created_state_dir")),
            before={int(k): int(v) for k, v in before.items()},
            direction=str(data.get("direction") or "forward"),
        )

    # -- publication ------------------------------------------------------------------
    def apply(self, set_generation: Callable[[str, int], None], *, first: bool = False) -> None:
        """Roll forward (every op is idempotent); raises OSError on a failed step.

        ``first``: the first pass of a commit that has just reached its commit point in
        this process, so no op has run yet: a put is then one ``link`` (keep the old copy)
        and one ``rename``, with no ``lstat`` to find out what an earlier pass did
        (:func:`_put_first`). Every other pass (a retry, a replay) checks each step."""
        scratch = scratch_dir(self.parent_root, self.commit_id)
        displaced_dir = scratch / "displaced"
        displaced_str = str(displaced_dir)
        root_str = str(self.parent_root)
        intent = self.intent
        made: list[bool] = [False]  # the displaced directory exists (first pass only)
        # the parent's record of its landings (``landed``): the first pass only, which
        # sees the directories as they were before this commit; a retry or a replay is
        # left unrecorded (judged as a change by hand)
        before = landed.dir_ctimes(root_str, landed.touched_dirs(self.ops)) if first else None
        for index, op in enumerate(self.ops):
            if first and op.kind == "put" and op.source is not None:
                _put_first(op, root_str, displaced_str, index, displaced_dir, intent, made)
            else:
                _apply_op(op, self.parent_root, displaced_dir / str(index), intent)
            crash_point(f"op:{index}")
        for op in self.ops:
            if op.kind == "put" and op.strip_xattrs:
                _strip_landed(f"{root_str}/{op.path}")
        set_generation(self.parent_id, self.generation)
        if before is not None:
            landed.append(self.path.parent.parent, self.parent_id, root_str, before, self.ops)
        crash_point("applied")

    def roll_back(self, set_generation: Callable[[str, int], None]) -> None:
        """Undo every applied op from what it displaced, newest first (idempotent)."""
        if self.direction != "back":
            self.direction = "back"
            write_json_atomic(self.path, self.to_json(), durable=True)
        scratch = scratch_dir(self.parent_root, self.commit_id)
        for index in range(len(self.ops) - 1, -1, -1):
            _undo_op(
                self.ops[index],
                self.parent_root,
                scratch / "displaced" / str(index),
                self.before.get(index),
            )
            crash_point(f"undo:{index}")
        set_generation(self.parent_id, self.generation - 1)

    def run(self, set_generation: Callable[[str, int], None], *, first: bool = False) -> Outcome:
        """Finish this journal here and now, whatever is raised at whatever step.

        Forward first; an interruption that is not an ``OSError`` (``KeyboardInterrupt``
        and friends) is held and the pass retried to the end. An ``OSError`` is a step
        that cannot be done: the commit is rolled back. Once a direction is complete it
        is never changed (``finish`` throws the displaced entries away). The journal
        stays only when this cannot finish (``outcome.pending``); then the branch's
        sources must stay where they are until a replay finishes it. ``first``: this
        process has just reached the commit point and applied nothing yet (the fast first
        pass of :meth:`apply`); a replay passes False.
        """
        outcome = Outcome()
        forward = self.direction == "forward"
        done = False
        for attempt in range(4):
            try:
                if forward:
                    self.apply(set_generation, first=attempt == 0 and first)
                else:
                    self.roll_back(set_generation)
                done = True
                break
            except OSError as exc:
                outcome.errors.append(exc)
                if not forward:
                    break
                forward = False
            except BaseException as exc:  # held, re-raised by the caller
                outcome.interrupt = outcome.interrupt or exc
        outcome.rolled_back = not forward
        if done:
            for _attempt in range(4):
                try:
                    self.finish()
                    return outcome
                except OSError as exc:
                    outcome.errors.append(exc)
                    break
                except BaseException as exc:  # held, re-raised by the caller
                    outcome.interrupt = outcome.interrupt or exc
        outcome.pending = True
        return outcome

    def finish(self) -> None:
        """Forget the journal, then everything the commit displaced.

        Once the journal is gone the commit is complete; scratch a failure (or a crash)
        leaves behind is swept by the next open, ``.pydantic-deep`` too when the commit
        made it (see ``STATE_MARK``).
        """
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        try:
            crash_point("finishing")
            scratch = scratch_dir(self.parent_root, self.commit_id)
            if not self._hand_to_reaper(scratch):
                # one entry per displaced file: a huge commit's are unlinked out of process
                # (treescan.remove_tree), so the committing thread does not hog the GIL; up
                # to EXTERNAL_REMOVE_OPS, by name in this thread (remove_shallow_tree)
                if len(self.ops) >= EXTERNAL_REMOVE_OPS:
                    remove_tree(scratch, external=True)
                else:
                    remove_shallow_tree(scratch)
            crash_point("scratch-removed")
            remove_empty_state_dirs(self.parent_root, remove_state_dir=self.created_state_dir,
                                     intent=self.intent)
        except OSError as exc:
            log.warning("commit %s done; its scratch is left for recovery: %s", self.commit_id, exc)


    def _hand_to_reaper(self, scratch: Path) -> bool:
        """Move a finished commit's scratch (its displaced old copies) into the store's
        ``trash/`` and let the background reaper delete it; False when it stays here
        (few entries, or another filesystem: a commit into a branch's view).

        Why: the commit is complete once its journal is gone; deleting one old copy per
        replaced file before returning was 19-55% of a commit's time. The trash name
        starts with this session's id (the commit id does), so a process killed before
        the reaper is done leaves it to ``Store.sweep_trash`` at the next open."""
        displacing = sum(1 for op in self.ops if op.kind == "delete" or
                         (op.kind == "put" and op.existed is not False))
        if displacing < REAP_FROM_OPS:
            return False
        trash = self.path.parent.parent / "trash" / f"{self.commit_id}.scratch"
        try:
            os.rename(scratch, trash)
        except FileNotFoundError:
            return not os.path.lexists(scratch)  # nothing staged or displaced, or no trash/
        except OSError:  # EXDEV...
            return False
        crash_point("scratch-reaped")
        reaper.reap(trash, in_process=len(self.ops) < EXTERNAL_REMOVE_OPS)
        return True


@dataclass
class Outcome:
    """How :meth:`Journal.run` ended."""

    rolled_back: bool = False
    pending: bool = False
    errors: list[OSError] = field(default_factory=list[OSError])
    interrupt: BaseException | None = None


def _dev_of(path: str) -> int:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return os.stat(os.path.dirname(path) or ".").st_dev
    return st.st_dev


def _copy_entry(source: Path, target: Path) -> None:
    if source.is_dir() and not source.is_symlink():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target, follow_symlinks=False)


STATE_MARK = ".made-state-dir"
STATE_INTENT = ".made-state-dir"  # suffix of the store's record (see ``state_intent``)


def state_intent(journal_dir: Path, commit_id: str) -> Path:
    """Where a commit records, in the store, that it is making ``.pydantic-deep``.

    A mark inside the state directory itself cannot say so at every instant: between
    the ``mkdir`` and the mark's creation, and between the scratch's removal (mark
    included) and the ``rmdir``, a SIGKILL left an empty ``.pydantic-deep`` that
    recovery took for the user's. The record is written before the directory exists
    and removed after it is gone, outside the workspace."""
    return journal_dir / f"{commit_id}{STATE_INTENT}"


def make_scratch(directory: Path, scratch: Path, intent: Path | None) -> None:
    """Make a directory of the commit's scratch. ``intent``: this commit makes
    ``.pydantic-deep`` for it; recorded in the store first (see ``state_intent``), and
    marked inside the scratch too (what older recoveries look for)."""
    if intent is not None and not intent.exists():
        intent.write_text(str(scratch.parent.parent.parent))  # the parent's root
    directory.mkdir(parents=True, exist_ok=True)
    if intent is not None:
        crash_point("state-dir-made")
        with contextlib.suppress(FileExistsError):
            (scratch / STATE_MARK).touch(exist_ok=False)


def _displace(target: Path, displaced: Path, intent: Path | None) -> None:
    """Keep ``target`` at ``displaced`` before an op removes it."""
    if lstat_or_none(displaced) is not None:
        return
    if not displaced.parent.exists():
        make_scratch(displaced.parent, displaced.parent.parent, intent)
    os.rename(target, displaced)


def _keep_copy(target: Path, displaced: Path, intent: Path | None) -> None:
    """Keep the old ``target`` at ``displaced`` while it stays in place (a hard link), so
    readers never see the path missing; a rename when linking is refused."""
    if lstat_or_none(displaced) is not None:
        return
    if not displaced.parent.exists():
        make_scratch(displaced.parent, displaced.parent.parent, intent)
    try:
        os.link(target, displaced, follow_symlinks=False)
    except OSError:
        os.rename(target, displaced)


def _put_first(
    op: Op,
    root: str,
    displaced_root: str,
    index: int,
    displaced_dir: Path,
    intent: Path | None,
    made: list[bool],
) -> None:
    """A put on the first pass, with no ``lstat``: ``link`` the old target to its
    displaced name (``ENOENT``: there was none, or the displaced directory is still to
    make), then ``rename`` the source over it. Anything unexpected (``link`` refused, a
    directory in the way) goes the checked way of :func:`_apply_op`, which sees the state
    this left and goes on from there (every step is idempotent).

    Only on a first pass: on a replay the target may already be the *new* file, which a
    blind ``link`` would keep as the old copy that a roll back restores."""
    assert op.source is not None
    target = f"{root}/{op.path}"
    displaced = f"{displaced_root}/{index}"
    try:
        os.link(target, displaced, follow_symlinks=False)
    except FileExistsError:
        pass
    except FileNotFoundError:
        if not made[0] and os.path.lexists(target):  # the displaced directory is missing
            make_scratch(displaced_dir, displaced_dir.parent, intent)
            made[0] = True
            _apply_op(op, Path(root), Path(displaced), intent)
            return
    except OSError:
        _apply_op(op, Path(root), Path(displaced), intent)
        return
    else:
        made[0] = True
    try:
        os.rename(op.source, target)
    except FileNotFoundError:
        _apply_op(op, Path(root), Path(displaced), intent)  # says which end is missing


def _apply_op(op: Op, parent_root: Path, displaced: Path, intent: Path | None) -> None:
    target = parent_root / op.path
    if op.kind == "delete":
        if lstat_or_none(target) is not None:
            _displace(target, displaced, intent)
    elif op.kind == "mkdir":
        st = lstat_or_none(target)
        if st is None:
            os.mkdir(target, op.mode if op.mode is not None else 0o755)
        if op.mode is not None:
            os.chmod(target, op.mode)
    elif op.kind == "put":
        assert op.source is not None
        source = Path(op.source)
        if lstat_or_none(source) is not None:
            target_st = lstat_or_none(target)
            if target_st is not None and not stat.S_ISDIR(target_st.st_mode):
                _keep_copy(target, displaced, intent)
            os.rename(source, target)
        elif lstat_or_none(target) is None:
            # Neither moved in nor still waiting: the source was lost (a store removed
            # under a replay). Skipping it would publish a partial commit.
            raise PathNotFoundError(errno.ENOENT, "the commit's source is gone", str(source))
    elif op.kind == "chmod" and op.mode is not None and lstat_or_none(target) is not None:
        os.chmod(target, op.mode)


def _undo_op(op: Op, parent_root: Path, displaced: Path, before: int | None) -> None:
    target = parent_root / op.path
    if op.kind == "delete":
        if lstat_or_none(displaced) is not None and lstat_or_none(target) is None:
            os.rename(displaced, target)
    elif op.kind == "mkdir":
        if before == -1:
            with contextlib.suppress(FileNotFoundError, OSError):
                os.rmdir(target)
        elif before is not None and lstat_or_none(target) is not None:
            os.chmod(target, before)
    elif op.kind == "put":
        assert op.source is not None
        source = Path(op.source)
        if lstat_or_none(source) is None and lstat_or_none(target) is not None:
            os.rename(target, source)
        if lstat_or_none(displaced) is not None and lstat_or_none(target) is None:
            os.rename(displaced, target)
    elif (
        op.kind == "chmod"
        and before is not None
        and before >= 0
        and lstat_or_none(target) is not None
    ):
        os.chmod(target, before)


def _strip_landed(path: str) -> None:
    """Drop overlayfs bookkeeping from what a put landed at ``path`` (one ``lstat``; a
    landed directory is walked by :func:`_strip_tree`)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISDIR(st.st_mode):
        _strip_tree(Path(path))
    elif not stat.S_ISLNK(st.st_mode):
        strip_overlay_xattrs(path)


def _strip_tree(path: Path) -> None:
    if not path.is_symlink():
        strip_overlay_xattrs(path)
    if path.is_dir() and not path.is_symlink():
        for dirpath, dirnames, filenames in os.walk(path):
            for name in dirnames + filenames:
                full = Path(dirpath) / name
                if not full.is_symlink():
                    strip_overlay_xattrs(full)


def remove_empty_state_dirs(
    parent_root: Path, *, remove_state_dir: bool, intent: Path | None = None
) -> None:
    """Leave no empty scratch behind; ``.pydantic-deep`` itself only if the commit made it
    (then its record in the store goes last, once the directory is gone)."""
    directories = [parent_root / PROJECT_STATE_DIR / "commit"]
    if remove_state_dir:
        directories.append(parent_root / PROJECT_STATE_DIR)
    for directory in directories:
        with contextlib.suppress(OSError):
            directory.rmdir()
    if intent is not None:
        intent.unlink(missing_ok=True)
