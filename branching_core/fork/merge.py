"""Resolving a fork: aborting it, or picking a winner: the winner's workspace branch lands in the
parent (one landing lock per parent, shared with sub-agent landings), losers are
discarded, the ``post-fork`` checkpoint is recorded.

:class:`ForkMerger` is held by :class:`~branching_core.fork.coordinator.ForkCoordinator`;
every ending goes through :meth:`ForkState.settle <branching_core.fork.state.ForkState.settle>`."""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core.errors import ConflictError, InvalidStateError
from branching_core.fork.actions import MergeAction
from branching_core.fork.checkpoints import HeldFiles
from branching_core.fork.git_landing import (
    GitLanding,
    GitOutcome,
    after_landing,
    keep_branch_commits,
    refusal,
    trailers_for,
)
from branching_core.fork.history import dumps_history
from branching_core.fork.runtime import (
    BranchRuntime,
)
from branching_core.fork.state import ForkState, Resolution
from branching_core.fork.types import (
    FlushError,
    FlushReport,
    MergeResult,
)
from branching_core.gitops.refs import LandedCommits
from branching_core.workspace.apply import changed_since
from branching_core.workspace.branch import Branch
from branching_core.workspace.changes import BranchChanges, Op, held_at_fork, summarize
from branching_core.workspace.land import branch_files, land_files
from branching_core.workspace.landing import landing_lock

if TYPE_CHECKING:
    from branching_core.fork.coordinator import ForkCoordinator
    from branching_core.fork.persistence import ForkRecorder


def _configured_git(root: Path) -> GitLanding | None:
    """``[git] commit_merges = true`` in the workspace's settings: commit every merge."""
    from branching_core.config.reading import load_settings

    try:
        on = load_settings(root).settings.git_commit_merges
    except Exception:  # unreadable settings: the reader reports them elsewhere
        return None
    return GitLanding(commit=True) if on else None


def _directories_in_view(branch_dir: Path, changes: BranchChanges) -> set[str]:
    """The created or modified paths that are directories, looked up in the branch's view."""
    return {
        p
        for p in (*changes.created, *changes.modified)
        if (branch_dir / p).is_dir() and not (branch_dir / p).is_symlink()
    }


def _directories(ops: list[Op]) -> set[str]:
    """The paths ``ops`` make or change that are directories (``mkdir``, ``chmod``, and a
    tree put with every directory inside it; a symlink is never one), read from the ops
    and their sources: the branch's view is unmounted while it is committed."""
    found: set[str] = set()

    def walk(source: str, rel: str) -> None:
        with os.scandir(source) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    found.add(f"{rel}/{entry.name}")
                    walk(entry.path, f"{rel}/{entry.name}")

    for op in ops:
        if op.kind in ("mkdir", "chmod"):
            found.add(op.path)
        elif op.kind == "put" and op.tree and op.source:
            found.add(op.path)
            walk(op.source, op.path)
    return found


class ForkMerger:
    """Ends a fork: discards branches, lands a picked one in the parent (or a combination,
    ``fork/combine.py``) and settles the :class:`ForkState` (the one place that runs the
    end-of-fork steps). Held by ``ForkCoordinator``; reads where the parent is (node,
    path, checkpoints) from the coordinator's public surface."""

    def __init__(
        self, coordinator: ForkCoordinator, state: ForkState, recorder: ForkRecorder
    ) -> None:
        self.fc = coordinator
        self.state = state
        self.recorder = recorder

    @property
    def parent_ws_id(self) -> str | None:
        """The workspace branch the fork was taken from (None: the workspace itself)."""
        fc = self.fc
        return None if fc.parent_node is fc.workspace else getattr(fc.parent_node, "id", None)

    async def discard(self, rt: BranchRuntime) -> None:
        """Stop ``rt`` (and any fork nested in it) and drop its workspace branch."""
        await self.fc.terminate_branch(rt.branch_id)
        if rt.child is not None and not rt.child.is_resolved:
            await rt.child.abort_fork()
        if rt.ws_branch is not None:
            if rt.ws_branch.is_open:
                await asyncio.to_thread(rt.ws_branch.abort)
            rt.ws_branch = None
        rt.resolution = "discarded"

    async def abort(self) -> list[str]:
        """Discard every branch and settle as ``abort``; returns their ids (none when there
        is no open fork)."""
        async with self.state.lock:
            if self.state.is_resolved:
                return []
            ids = []
            for rt in self.state.branches.values():
                await self.discard(rt)
                ids.append(rt.branch_id)
            await self.state.settle(Resolution("abort"), discarded=ids)
            return ids

    async def merge(
        self, merge: MergeAction, *, git: GitLanding | None, **judge_options: Any
    ) -> MergeResult:
        """``ForkCoordinator.merge_or_select`` once the action is typed and ``git`` known."""
        if git is None and merge.git_commit is not None:  # the typed spelling of the same
            git = GitLanding(commit=True, message=merge.git_commit.message,
                             branch=merge.git_commit.branch,
                             trailers=dict(merge.git_commit.trailers))
        if git is None:
            git = _configured_git(self.fc.workspace.path)
        handle = self.state.require_handle()
        if merge.kind == "abort":
            ids = await self.abort()
            return MergeResult(
                fork_id=handle.fork_id,
                action="abort",
                discarded_branch_ids=ids,
                pre_fork_checkpoint_id=handle.parent_checkpoint_id,
            )
        if merge.kind == "auto":
            outcome = await self.fc.resolve(
                replace(handle.merge_strategy, kind="auto"), **judge_options
            )
            if outcome.committed and outcome.merge_result is not None:
                return outcome.merge_result
            raise InvalidStateError(
                f"the judge did not pick a branch ({outcome.fallback_reason or 'no verdict'}): "
                "use 'pick:<label>' or 'abort'"
            )
        if merge.kind == "combine":  # per path / per hunk from several branches (fork.combine)
            return await self._combine(merge, git, **judge_options)
        assert merge.label is not None
        return await self._pick(merge, merge.label, git)

    async def _combine(
        self, merge: MergeAction, git: GitLanding | None, **judge_options: Any
    ) -> MergeResult:
        from branching_core.fork.combine import merge_combined

        handle = self.state.require_handle()
        why = refusal(git, self.fc.parent_path)
        if why is not None:
            raise InvalidStateError(f"nothing merged: git: {why}")
        if merge.selection is not None:
            judge_options = {"selection": merge.selection, "base": merge.base, **judge_options}
        combined = await merge_combined(self, **judge_options)
        if git is not None and git.commit and not combined.aborted:
            outcome = GitOutcome()
            await asyncio.to_thread(
                after_landing, git, outcome, self.fc.parent_path,
                [*combined.applied_paths, *combined.deleted_paths],
                in_workspace=self.fc.parent_node is self.fc.workspace, steer=None,
                trailers=trailers_for(handle.fork_id, "combine", None),
            )
            combined.git_commit = outcome.commit.commit if outcome.commit else None
            combined.git_notes.extend(outcome.notes)
        return combined

    async def _pick(self, merge: MergeAction, label: str, git: GitLanding | None) -> MergeResult:
        fc = self.fc
        async with self.state.lock:
            handle = self.state.require_open()
            winner = self.state.get_branch(label)
            if winner.ws_branch is None:
                raise InvalidStateError(
                    f"branch {winner.label} has no workspace branch left to merge"
                )
            if winner.task is not None and not winner.task.done():
                if winner.task is asyncio.current_task():
                    raise InvalidStateError("a branch cannot merge itself")
                await asyncio.wait([winner.task])
            if merge.on_conflict == "refuse":
                await self._refuse_conflicts(winner)
            why = refusal(git, fc.parent_path)
            if why is not None:
                raise InvalidStateError(f"nothing merged: git: {why}")
            if winner.child is not None and not winner.child.is_resolved:
                await winner.child.abort_fork()
            discarded = []
            for rt in self.state.branches.values():
                if rt is not winner:
                    await self.discard(rt)
                    discarded.append(rt.branch_id)
            # The landing's file work runs in as few worker-thread hops as it can (each
            # hop waits for the event loop and the GIL on a busy machine): keeping the
            # winner's git commits, the commit, and (without git) nothing else.
            kept, report, touched, held = await self._apply(winner)
            # copying the pre-merge files and recording the merged ones waits until the
            # fork is settled (or the settling failed), so it does not compete with the
            # merge for the GIL; it is tracked now, so the retention prune waits for it
            settled = asyncio.Event()
            self.record_post_fork(handle.fork_id, fc.parent_path, touched, held, settled)
            try:
                git_outcome = GitOutcome(kept=kept)
                landing = (
                    git,
                    git_outcome,
                    fc.parent_path,
                    [*report.applied_paths, *report.deleted_paths],
                )
                landing_options: dict[str, Any] = {
                    "in_workspace": fc.parent_node is fc.workspace,
                    "steer": winner.spec.steer,
                    "trailers": trailers_for(
                        handle.fork_id, winner.label, winner.spec.model or fc.default_model
                    ),
                }
                if git is None:  # notes only, no file work: no thread hop
                    after_landing(*landing, **landing_options)
                else:
                    await asyncio.to_thread(after_landing, *landing, **landing_options)
                history = winner.partial_history or list(winner.seed_history)
                post_id = await asyncio.to_thread(
                    self._save_post_fork, handle.fork_id, history
                )
                winner.resolution = "merged"
                winner.ws_branch = None
                await self.state.settle(
                    Resolution("pick", winner.branch_id),
                    discarded=discarded,
                    post_checkpoint=post_id,
                )
            finally:
                settled.set()
            return MergeResult(
                fork_id=handle.fork_id,
                action=str(merge),
                winner_branch_id=winner.branch_id,
                winner_label=winner.label,
                winner_state=winner.state,
                applied_paths=report.applied_paths,
                applied_changes=report.applied_changes,
                deleted_paths=report.deleted_paths,
                conflicts=report.conflicts,
                errors=report.errors,
                history_after_merge=history,
                discarded_branch_ids=discarded,
                partial=winner.state != "done",
                pre_fork_checkpoint_id=handle.parent_checkpoint_id,
                post_fork_checkpoint_id=post_id,
                git_ref=kept.ref,
                git_commit=git_outcome.commit.commit if git_outcome.commit else None,
                git_notes=git_outcome.notes,
            )

    async def _refuse_conflicts(self, winner: BranchRuntime) -> None:
        """``on_conflict="refuse"``: raise ``ConflictError`` naming the paths the parent
        changed since the fork (the one conflict rule, ``changes.find_conflicts`` through
        ``changed_since``) before anything is discarded or landed: every file, branch and
        the fork stay as they were. Read under the landing lock (never halfway through another
        landing of this parent); a change of the parent after this check and before the
        commit is still caught by the commit, which then leaves those paths alone."""
        branch = winner.ws_branch
        assert branch is not None
        async with landing_lock(self.fc.parent_node):
            conflicts = await asyncio.to_thread(
                changed_since, branch.changes(), self.fc.parent_path, branch.created_ns
            )
        if conflicts:
            shown = ", ".join(conflicts[:5]) + (
                f" and {len(conflicts) - 5} more" if len(conflicts) > 5 else ""
            )
            raise ConflictError(
                f"branch {winner.label} was not merged: {shown} changed in the parent since "
                "the fork; nothing changed (the fork is still open)",
                conflicts,
            )

    def _save_post_fork(self, fork_id: str, history: list[Any]) -> str:
        """The ``post-fork`` anchor's history (its files are recorded after the settle)."""
        return self.fc.checkpoints.save(
            fork_id,
            "post-fork",
            dumps_history(history),
            parent_workspace_branch_id=self.parent_ws_id,
        )

    async def _apply(
        self, rt: BranchRuntime
    ) -> tuple[LandedCommits, FlushReport, list[str], HeldFiles]:
        """Commit ``rt``'s workspace branch into the parent (per path on a conflict), in
        one worker thread, after fetching the winner's own git commits
        (``keep_branch_commits``). Returns them, the report, the touched paths and
        the pre-merge files held for ``record_post_fork``, which the caller starts.

        Everything that touches files (listing the changes, holding the pre-merge files,
        the commit, the per-path fallback) runs in that one thread, and the copies of
        the replaced files are made after the commit (see CheckpointStore.hold_files): the
        event loop (a TUI) never waits on the size of the branch or of its files."""
        fork_id = self.state.require_handle().fork_id
        parent_dir = self.fc.parent_path
        branch = rt.ws_branch

        def work() -> tuple[LandedCommits, FlushReport, list[str], HeldFiles]:
            kept = keep_branch_commits(branch, parent_dir, fork_id, rt.label)
            return (kept, *self._apply_blocking(branch, fork_id, parent_dir))

        # One lock per parent path for every landing (forks of one parent, sub-agents):
        # the stale check and the commit of two landings never interleave.
        async with landing_lock(self.fc.parent_node):
            return await asyncio.to_thread(work)

    def _apply_blocking(
        self, branch: Any, fork_id: str, parent_dir: Path
    ) -> tuple[FlushReport, list[str], HeldFiles]:
        """Land ``branch``: its commit, or path by path when it is stale or conflicts.

        For a commit, what it changes (the report, the pre-merge files to hold) is learnt
        from the commit's own collection of the frozen branch (``Branch.commit``'s
        ``on_ready``), not from listing the branch once more before it: one walk of the
        branch's changes and no ``lstat`` per path through its view."""
        branch_dir = Path(branch.path)
        if branch.is_stale:
            changes, is_dir, held = self._listed(branch, branch_dir, fork_id, parent_dir)
            try:
                report = self._land_stale(branch, branch_dir, parent_dir, changes, is_dir)
            except BaseException:
                with contextlib.suppress(Exception):
                    held.finish()  # what the parent held before is still worth keeping
                raise
            return report, changes.all_paths, held
        ready: list[tuple[BranchChanges, set[str], HeldFiles]] = []

        def on_ready(ops: list[Op], parent_root: Path) -> None:
            changes = summarize(ops, parent_root)
            held = self.fc.checkpoints.hold_files(fork_id, "fork", parent_dir, changes.all_paths)
            ready.append((changes, _directories(ops), held))

        def commit() -> None:
            if isinstance(branch, Branch):
                branch.commit(on_ready=on_ready)
                return
            # a branch elsewhere (a Ray actor's RemoteForkBranch) lands a delta, not
            # ops: what it changes is listed before its commit, as before
            ready.append(self._listed(branch, branch_dir, fork_id, parent_dir))
            branch.commit()

        report = FlushReport()
        try:
            commit()
        except ConflictError as exc:
            if exc.stale:  # a sibling committed first: nothing applied
                report.errors.append(FlushError("*", str(exc)))
                held = ready[0][2] if ready else self.fc.checkpoints.hold_files(
                    fork_id, "fork", parent_dir, []
                )
                return report, ready[0][0].all_paths if ready else [], held
            # refused by the conflict rule before the commit point: the branch is open
            changes, is_dir, held = self._listed(branch, branch_dir, fork_id, parent_dir)
            try:
                report.conflicts = sorted(exc.paths)
                self._land_paths(branch, branch_dir, changes, set(exc.paths), report)
                if branch.is_open:
                    branch.abort()
            except BaseException:
                with contextlib.suppress(Exception):
                    held.finish()
                raise
            report.applied_changes = len(report.applied_paths) + len(report.deleted_paths)
            return report, changes.all_paths, held
        except BaseException:
            if ready:
                with contextlib.suppress(Exception):
                    ready[0][2].finish()  # what the parent held before is still worth keeping
            raise
        changes, is_dir, held = ready[0]
        report.applied_paths = sorted(
            p for p in {*changes.created, *changes.modified} if p not in is_dir
        )
        report.deleted_paths = list(changes.deleted)
        report.applied_changes = len(report.applied_paths) + len(report.deleted_paths)
        return report, changes.all_paths, held

    def _listed(
        self, branch: Any, branch_dir: Path, fork_id: str, parent_dir: Path
    ) -> tuple[BranchChanges, set[str], HeldFiles]:
        """What ``branch`` changes, listed through its view (a stale branch, a refused
        commit's per-path fallback, a branch on a Ray actor): the changes, which of them
        are directories, and the parent's pre-merge files held for ``record_post_fork``."""
        changes = branch.changes()
        held = self.fc.checkpoints.hold_files(fork_id, "fork", parent_dir, changes.all_paths)
        return changes, _directories_in_view(branch_dir, changes), held

    def _land_stale(
        self, branch: Any, branch_dir: Path, parent_dir: Path, changes: Any, is_dir: set[str]
    ) -> FlushReport:
        """Another fork of the same parent committed first (the workspace's first-winner
        rule would abort this branch on commit): apply path by path instead, with the same
        conflict rule, so the winner's work is never thrown away."""
        report = FlushReport()
        conflicts = changed_since(changes, parent_dir, branch.created_ns)
        report.conflicts = conflicts
        self._land_paths(branch, branch_dir, changes, set(conflicts), report)
        branch.abort()
        report.applied_changes = len(report.applied_paths) + len(report.deleted_paths)
        return report

    def record_post_fork(
        self,
        fork_id: str,
        parent_dir: Path,
        touched: list[str],
        held: HeldFiles,
        start: asyncio.Event | None = None,
    ) -> None:
        """Finish the pre-merge record (copy the held files) and record the merged files for
        ``post-fork:<id>``, in a worker thread (``flush()`` waits for both), once ``start``
        is set (at once without it)."""
        record = self.fc.checkpoints.record_files

        def work() -> None:
            try:
                held.finish()
            finally:
                record(fork_id, "post-fork", parent_dir, touched)

        async def when_started() -> None:
            if start is not None:
                await start.wait()
            await asyncio.to_thread(work)

        self.recorder.track(asyncio.get_running_loop().create_task(when_started()))

    def _land_paths(
        self, branch: Any, branch_dir: Path, changes: Any, conflicts: set[str], report: FlushReport
    ) -> None:
        """Land the branch's paths but ``conflicts`` in one journaled commit (the one
        landing function, so the landing rule holds here too); a path the parent changed
        meanwhile is one more conflict, and nothing is applied."""
        files, dirs = branch_files(branch_dir, changes, skip=conflicts)
        if not files and not dirs:
            return
        try:
            landed = land_files(
                self.fc.parent_node,
                files,
                dirs=dirs,
                since_ns=branch.created_ns,
                source_root=branch_dir,
                label=f"branch {branch.name} (path by path)",
                # what the parent held at the fork: one deleted since is a conflict here
                # too, not a file to create (as the sub-agents' per-path landing says)
                existed=held_at_fork(changes),
            )
        except ConflictError as exc:
            report.conflicts = sorted({*report.conflicts, *exc.paths})
            report.errors.append(FlushError("*", str(exc)))
            return
        report.applied_paths.extend(
            sorted(p for p in {*landed.created, *landed.modified} if p not in dirs)
        )
        report.deleted_paths.extend(landed.deleted)
