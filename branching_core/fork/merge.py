"""Resolving a fork: aborting it, or picking a winner: the winner's workspace branch lands in the
parent (one landing lock per parent, shared with sub-agent landings), losers are
discarded, the ``post-fork`` checkpoint is recorded.

A mixin of :class:`~branching_core.fork.coordinator.ForkCoordinator`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from branching_core.errors import ConflictError, InvalidStateError, OperationError
from branching_core.fork import events as ev
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
from branching_core.fork.parts import CoordinatorParts
from branching_core.fork.runtime import (
    BranchRuntime,
)
from branching_core.fork.types import (
    FlushError,
    FlushReport,
    MergeResult,
)
from branching_core.workspace.apply import changed_since
from branching_core.workspace.land import branch_files, land_files
from branching_core.workspace.landing import landing_lock


def _configured_git(root: Path) -> GitLanding | None:
    """``[git] commit_merges = true`` in the workspace's settings: commit every merge."""
    from branching_core.config.reading import load_settings

    try:
        on = load_settings(root).settings.git_commit_merges
    except Exception:  # unreadable settings: the reader reports them elsewhere
        return None
    return GitLanding(commit=True) if on else None


class Merging(CoordinatorParts):
    """``merge_or_select``, ``abort_fork`` and landing a branch in its parent (mixin of
    ``ForkCoordinator``)."""

    async def _discard(self, rt: BranchRuntime) -> None:
        await self.terminate_branch(rt.branch_id)
        if rt.child is not None and not rt.child.is_resolved:
            await rt.child.abort_fork()
        if rt.ws_branch is not None:
            if rt.ws_branch.is_open:
                await asyncio.to_thread(rt.ws_branch.abort)
            rt.ws_branch = None
        rt.resolution = "discarded"

    async def abort_fork(self) -> list[str]:
        """Discard every branch (tasks cancelled, workspace branches aborted); returns their ids."""
        async with self._lock:
            if self._handle is None or self._resolved:
                return []
            ids = []
            for rt in self._branches.values():
                await self._discard(rt)
                ids.append(rt.branch_id)
            self._resolved = True
            self._resolution = "abort"
            self._resolved_at = time.time()
            await self._writer.flush()
            await self._persist_durable()
            self._prune_later()
            self._publish(
                ev.ForkResolved(fork_id=self._handle.fork_id, action="abort", discarded=tuple(ids))
            )
            return ids

    async def merge_or_select(
        self,
        action: MergeAction | str,
        *,
        git: GitLanding | None = None,
        git_commit: bool | str | None = None,
        git_branch: str | None = None,
        git_ff: bool = False,
        **judge_options: Any,
    ) -> MergeResult:
        """End the fork as ``action`` says (a :class:`MergeAction`, or its string form,
        parsed by ``MergeAction.parse``): ``pick`` merges that branch; ``abort`` discards
        them all; ``auto`` lets the judge pick and merges its pick (``judge_options`` go to
        :meth:`resolve`, e.g. ``judges=[...]``, ``test_command=...``); a judge that cannot
        name a branch raises ``RuntimeError`` and nothing is merged; ``combine`` lands a
        selection (``fork.combine``; with the string form, ``selection=`` comes here).

        The winner (awaited if still running) is committed into the parent: conflicting paths
        (changed in the parent since the fork) are reported and left alone, the rest applied.
        Losers are cancelled and their workspace branches aborted. A budget-stopped or
        terminated winner merges its files and its partial history.

        Git (issue 25): commits made inside the winner are kept as
        ``forkdeck/<fork>/<label>`` in the parent's repository (``MergeResult.git_ref``);
        ``git=GitLanding(commit=True, ...)`` (or the flags' spelling ``git_commit=True`` /
        ``"message"``, ``git_branch="name"``, ``git_ff=True``; default: ``[git]
        commit_merges`` of the workspace's settings) then commits exactly the landed paths.
        Each git outcome is a line in ``MergeResult.git_notes``; it never fails the merge,
        except up front with ``all_or_nothing`` (``RuntimeError``, nothing merged).
        """
        if git is None and (git_commit or git_branch or git_ff):
            # the headless flags' spelling: --git-commit[=MESSAGE], --git-branch, --git-ff
            git = GitLanding(
                commit=bool(git_commit) or git_branch is not None,
                message=git_commit if isinstance(git_commit, str) and git_commit else None,
                branch=git_branch,
                fast_forward=git_ff,
            )
        merge = MergeAction.coerce(action)
        if git is None and merge.git_commit is not None:  # the typed spelling of the same
            git = GitLanding(commit=True, message=merge.git_commit.message,
                             branch=merge.git_commit.branch)
        if git is None:
            git = _configured_git(self.workspace.path)
        handle = self._require_handle()
        if merge.kind == "abort":
            ids = await self.abort_fork()
            return MergeResult(
                fork_id=handle.fork_id,
                action="abort",
                discarded_branch_ids=ids,
                pre_fork_checkpoint_id=handle.parent_checkpoint_id,
            )
        if merge.kind == "auto":
            outcome = await self.resolve(
                replace(handle.merge_strategy, kind="auto"), **judge_options
            )
            if outcome.committed and outcome.merge_result is not None:
                return outcome.merge_result
            raise OperationError(
                f"the judge did not pick a branch ({outcome.fallback_reason or 'no verdict'}): "
                "use 'pick:<label>' or 'abort'"
            )
        if merge.kind == "combine":  # per path / per hunk from several branches (fork.combine)
            from branching_core.fork.combine import merge_combined

            why = refusal(git, self.parent_path)
            if why is not None:
                raise OperationError(f"nothing merged: git: {why}")
            if merge.selection is not None:
                judge_options = {"selection": merge.selection, "base": merge.base, **judge_options}
            combined = await merge_combined(self, **judge_options)
            if git is not None and git.commit and not combined.aborted:
                outcome = GitOutcome()
                await asyncio.to_thread(
                    after_landing, git, outcome, self.parent_path,
                    [*combined.applied_paths, *combined.deleted_paths],
                    in_workspace=self.parent_node is self.workspace, steer=None,
                    trailers=trailers_for(handle.fork_id, "combine", None),
                )
                combined.git_commit = outcome.commit.commit if outcome.commit else None
                combined.git_notes.extend(outcome.notes)
            return combined
        assert merge.label is not None
        action = str(merge)
        async with self._lock:
            if self._resolved:
                raise InvalidStateError(
                    f"fork {handle.fork_id} is already resolved ({self._resolution})"
                )
            winner = self.get_branch(merge.label)
            if winner.ws_branch is None:
                raise InvalidStateError(
                    f"branch {winner.label} has no workspace branch left to merge"
                )
            if winner.task is not None and not winner.task.done():
                if winner.task is asyncio.current_task():
                    raise InvalidStateError("a branch cannot merge itself")
                await asyncio.wait([winner.task])
            why = refusal(git, self.parent_path)
            if why is not None:
                raise OperationError(f"nothing merged: git: {why}")
            if winner.child is not None and not winner.child.is_resolved:
                await winner.child.abort_fork()
            discarded = []
            for rt in self._branches.values():
                if rt is not winner:
                    await self._discard(rt)
                    discarded.append(rt.branch_id)
            kept = await asyncio.to_thread(
                keep_branch_commits,
                winner.ws_branch,
                self.parent_path,
                handle.fork_id,
                winner.label,
            )
            report = await self._apply(winner)
            git_outcome = GitOutcome(kept=kept)
            await asyncio.to_thread(
                after_landing,
                git,
                git_outcome,
                self.parent_path,
                [*report.applied_paths, *report.deleted_paths],
                in_workspace=self.parent_node is self.workspace,
                steer=winner.spec.steer,
                trailers=trailers_for(
                    handle.fork_id, winner.label, winner.spec.model or self.default_model
                ),
            )
            history = winner.partial_history or list(winner.seed_history)
            history_json = dumps_history(history)
            post_id = await asyncio.to_thread(
                self.checkpoints.save,
                handle.fork_id,
                "post-fork",
                history_json,
                parent_workspace_branch_id=self._parent_ws_id(),
            )
            winner.resolution = "merged"
            winner.ws_branch = None
            self._resolved = True
            self._resolution = f"pick:{winner.branch_id}"
            self._post_checkpoint = post_id
            self._resolved_at = time.time()
            await self._writer.flush()
            await self._persist_durable()
            self._prune_later()
            self._publish(
                ev.ForkResolved(
                    fork_id=handle.fork_id,
                    action=self._resolution,
                    winner_branch_id=winner.branch_id,
                    discarded=tuple(discarded),
                )
            )
            return MergeResult(
                fork_id=handle.fork_id,
                action=action,
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

    def _parent_ws_id(self) -> str | None:
        return None if self.parent_node is self.workspace else getattr(self.parent_node, "id", None)

    async def _apply(self, rt: BranchRuntime) -> FlushReport:
        """Commit ``rt``'s workspace branch into the parent; fall back to per-path on conflict."""
        # One lock per parent path for every landing (forks of one parent, sub-agents):
        # the stale check and the commit of two landings never interleave.
        async with landing_lock(self.parent_node):
            return await self._apply_locked(rt)

    async def _apply_locked(self, rt: BranchRuntime) -> FlushReport:
        # Everything that touches files (listing the changes, holding the pre-merge files,
        # the commit, the per-path fallback) runs in one worker thread, and the copies of
        # the replaced files are made after the commit (see CheckpointStore.hold_files): the
        # event loop (a TUI) never waits on the size of the branch or of its files.
        fork_id = self._require_handle().fork_id
        parent_dir = self.parent_path
        report, touched, held = await asyncio.to_thread(
            self._apply_blocking, rt.ws_branch, fork_id, parent_dir
        )
        self._record_post_fork(fork_id, parent_dir, touched, held)
        return report

    def _apply_blocking(
        self, branch: Any, fork_id: str, parent_dir: Path
    ) -> tuple[FlushReport, list[str], HeldFiles]:
        branch_dir = Path(branch.path)
        changes = branch.changes()
        touched = changes.all_paths
        is_dir = {
            p
            for p in (*changes.created, *changes.modified)
            if (branch_dir / p).is_dir() and not (branch_dir / p).is_symlink()
        }
        held = self.checkpoints.hold_files(fork_id, "fork", parent_dir, touched)
        try:
            report = self._commit_or_apply(branch, branch_dir, parent_dir, changes, is_dir)
        except BaseException:
            with contextlib.suppress(Exception):
                held.finish()  # what the parent held before is still worth keeping
            raise
        return report, touched, held

    def _commit_or_apply(
        self, branch: Any, branch_dir: Path, parent_dir: Path, changes: Any, is_dir: set[str]
    ) -> FlushReport:
        report = FlushReport()
        if branch.is_stale:
            # Another fork of the same parent committed first (the workspace's first-winner
            # rule would abort this branch on commit): apply path by path instead, with the
            # same conflict rule, so the winner's work is never thrown away.
            conflicts = changed_since(changes, parent_dir, branch.created_ns)
            report.conflicts = conflicts
            self._land_paths(branch, branch_dir, changes, set(conflicts), report)
            branch.abort()
        else:
            try:
                branch.commit()
                report.applied_paths = sorted(
                    p for p in {*changes.created, *changes.modified} if p not in is_dir
                )
                report.deleted_paths = list(changes.deleted)
            except ConflictError as exc:
                if exc.stale:
                    report.errors.append(FlushError("*", str(exc)))
                else:
                    report.conflicts = sorted(exc.paths)
                    self._land_paths(branch, branch_dir, changes, set(exc.paths), report)
                    if branch.is_open:
                        branch.abort()
        report.applied_changes = len(report.applied_paths) + len(report.deleted_paths)
        return report

    def _record_post_fork(
        self, fork_id: str, parent_dir: Path, touched: list[str], held: HeldFiles
    ) -> None:
        """Finish the pre-merge record (copy the held files) and record the merged files for
        ``post-fork:<id>``, in a worker thread (``flush()`` waits for both)."""
        record = self.checkpoints.record_files

        def work() -> None:
            try:
                held.finish()
            finally:
                record(fork_id, "post-fork", parent_dir, touched)

        task = asyncio.get_running_loop().create_task(asyncio.to_thread(work))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

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
                self.parent_node,
                files,
                dirs=dirs,
                since_ns=branch.created_ns,
                source_root=branch_dir,
                label=f"branch {branch.name} (path by path)",
            )
        except ConflictError as exc:
            report.conflicts = sorted({*report.conflicts, *exc.paths})
            report.errors.append(FlushError("*", str(exc)))
            return
        report.applied_paths.extend(
            sorted(p for p in {*landed.created, *landed.modified} if p not in dirs)
        )
        report.deleted_paths.extend(landed.deleted)
