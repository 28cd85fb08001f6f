"""``ForkCoordinator``: runs the branches of one fork of one parent run, and resolves it.

Each branch is an ``asyncio`` task driving ``agent.iter()`` with

* the parent's history copied at the fork point (unanswered tool calls trimmed),
* its own durable copy-on-write workspace branch (a nested fork branches the branch),
  to which its file tools and shell commands are bound,
* its own steering queue (delivered to its very next model request),
* its own model when ``BranchSpec.model`` names one, its own ``extra_instructions``,
* its own budget, checked after every model response (before that response's tool calls
  run); the fork-wide ``aggregate_budget_usd`` is checked at the same moment.

The coordinator never imports a UI; front ends poll :meth:`inspect_branches` or subscribe
to its events (:meth:`subscribe`, :meth:`add_listener`). The diff report, the process
report and the judge are the review layer's (below fork): :meth:`diff_report`,
:meth:`resolve` and :meth:`process_report` call them directly, typed, imported on first use
so that forking and merging by hand never load the judge.

This module is the facade: construction, options, events, ``fork()``, steering, nesting,
termination, and one-line delegations to the objects that hold the fork's state and do
its work (each owns its own fields; none reaches into another's):

* ``opening.py``      ``open_fork()``: validating specs, branches, checkpoint, first manifest
* ``state.py``        ``ForkState``: handle, branches, resolution; ``settle()``, the one way
                      a fork ends (pick, combine, abort, the judge's pick)
* ``persistence.py``  ``ForkRecorder``: manifest and history saves, background checkpoint
                      copies, retention; ``recover_forks()``, ``list_open_forks``
* ``run_loop.py``     ``BranchRunner``: starting a branch, ``agent.iter()``, streaming,
                      the budget check; its ``ApprovalBroker`` (``approvals.py``)
* ``merge.py``        ``ForkMerger``: ``merge_or_select``, ``abort_fork``, landing the
                      winner (``combine.py``: landing a combination)
* ``inspection.py``   costs, waiting, each branch's file changes
* ``runtime.py``      ``BranchRuntime`` (one branch's live state), ``current_branch()``
* ``state_writer.py`` the coalescing background writer; ``mirror/`` the on-disk mirror
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from pydantic_ai.messages import ModelMessage

from branching_core.agent.hub import EventHub
from branching_core.errors import InvalidStateError
from branching_core.fork import events as ev
from branching_core.fork.actions import MergeAction
from branching_core.fork.approvals import approval_predicate
from branching_core.fork.branch_files import BranchFiles, branch_files_for
from branching_core.fork.branch_network import ForkNetworks
from branching_core.fork.budget import PriceFn, default_price
from branching_core.fork.checkpoints import CheckpointStore
from branching_core.fork.external_branch import is_external
from branching_core.fork.git_landing import GitLanding
from branching_core.fork.inspection import file_changes, fork_cost, wait_for
from branching_core.fork.merge import ForkMerger
from branching_core.fork.mirror import ForkMaterializer
from branching_core.fork.opening import open_fork
from branching_core.fork.options import DepsFactory, ForkOptions, ModelResolver
from branching_core.fork.persistence import (
    ForkRecorder,
    build_manifest,
    list_open_forks,
    recover_forks,
)
from branching_core.fork.run_loop import BranchRunner
from branching_core.fork.runtime import (
    INTERRUPTED,
    BranchRunContext,
    BranchRuntime,
    as_workspace,
    current_branch,
    states_final,
)
from branching_core.fork.state import ForkState
from branching_core.fork.store import ForkStore
from branching_core.fork.types import (
    BranchIsolation,
    BranchSpec,
    BranchState,
    BranchStatus,
    FileChange,
    ForkCostSummary,
    ForkHandle,
    MergeResult,
    MergeStrategy,
)
from branching_core.workspace import Workspace

if TYPE_CHECKING:  # the review layer is imported when used: a fork alone never loads it
    from branching_core.config.schema import Settings
    from branching_core.fork.combine import CombinePlan, Selection
    from branching_core.fork.estimate import ForkEstimate
    from branching_core.review.process_report import ProcessReport
    from branching_core.review.resolver import ModelChoice
    from branching_core.review.types import BranchDiffReport, ResolveOutcome
    from branching_core.sandbox import ResourceLimits

log = logging.getLogger(__name__)


class ForkCoordinator:
    """Owns the branches of one fork of one parent run (see the module docstring).

    ``agent`` is the pydantic-ai ``Agent`` the branches run (the parent's own agent when
    used through :class:`LiveForkCapability`). ``workspace`` is the project directory;
    ``parent_node`` is what branches are taken from (the workspace itself, or the outer
    branch's ``Branch`` for a nested fork). How branches run, are priced and guarded is one
    :class:`ForkOptions` value (``options=``), handed whole to nested forks; its fields may
    also be given as keyword arguments (``ForkCoordinator(agent, workspace=p, price_fn=f)``),
    which override ``options``.
    """

    def __init__(
        self,
        agent: Any = None,
        parent_deps: Any = None,
        *,
        workspace: Workspace | str | os.PathLike[str],
        parent_node: Any = None,
        depth: int = 0,
        store: ForkStore | None = None,
        checkpoint_store: CheckpointStore | None = None,
        parent_runtime: BranchRuntime | None = None,
        parent_coordinator: ForkCoordinator | None = None,
        options: ForkOptions | None = None,
        **option_overrides: Any,
    ) -> None:
        self.agent = agent
        self.parent_deps = parent_deps
        self.options = ForkOptions.build(options, **option_overrides)
        self.workspace = as_workspace(workspace)
        self.parent_node = parent_node if parent_node is not None else self.workspace
        self.depth = depth
        self.store = store or ForkStore(self.workspace.path)
        self.checkpoints = checkpoint_store or CheckpointStore(self.store)
        self.parent_runtime = parent_runtime
        self.parent_coordinator = parent_coordinator
        self.approval_required = approval_predicate(self.options.approval_required)
        self._events: EventHub[ev.ForkEvent] = EventHub("fork event")
        self.recovery_errors: list[str] = []
        self.state = ForkState(
            save=self._save_settled,
            prune=self._prune_later,
            release_networks=self.release_networks,
            publish=self._events.publish,
        )
        """This fork's handle, branches and resolution (``ForkState.settle`` ends it)."""
        self.recorder = ForkRecorder(
            self.store,
            manifest=self._manifest,
            branches=lambda: self.state.branches.values(),
            keep_resolved=lambda: self.options.keep_resolved,
        )
        """Saves this fork's state (manifest, histories, checkpoint copies, retention)."""
        self.save_errors: list[str] = self.recorder.save_errors
        """Every failed save of fork state (each is also logged and set on its branch)."""
        self.runner = BranchRunner(self, self.state, self.recorder, self._events.publish)
        """Runs the branches (``agent.iter()``, budgets, approvals)."""
        self.merger = ForkMerger(self, self.state, self.recorder)
        """Ends the fork: lands a pick or a combination, or discards every branch."""
        self.branch_files: BranchFiles = branch_files_for(
            self.options.runner, command_runner=self.options.command_runner,
            live_view=self.options.materialize,
            networks=ForkNetworks(self.options.network) if self.options.network else None,
        )
        """Where this fork's branch files live and how their tools reach them."""
        # On-disk mirror for diff tools (fork/mirror/); nested coordinators inherit the
        # setting with their options.
        self.mirror_hook: Any = None
        if self.materialize:
            self.mirror_hook = ForkMaterializer.attach(self, keep_artifacts=self.keep_artifacts)

    # -- options (read-only views of ``self.options``) --------------------------------------
    @property
    def model_resolver(self) -> ModelResolver | None:
        return self.options.model_resolver

    @property
    def price_fn(self) -> PriceFn:
        return self.options.price_fn or default_price

    @property
    def default_model(self) -> Any:
        return self.options.default_model

    @property
    def command_runner(self) -> Any:
        return self.options.command_runner

    @property
    def provide_workspace_tools(self) -> bool:
        return self.options.provide_workspace_tools

    @property
    def deps_factory(self) -> DepsFactory | None:
        return self.options.deps_factory

    @property
    def stream_text(self) -> bool:
        return self.options.stream_text

    @property
    def usage_limits(self) -> Any:
        return self.options.usage_limits

    @property
    def materialize(self) -> bool:
        return self.options.materialize

    @property
    def keep_artifacts(self) -> bool:
        return self.options.keep_artifacts

    # -- properties (seed 004) -------------------------------------------------------------
    @property
    def fork_id(self) -> str | None:
        return self.state.fork_id

    @property
    def handle(self) -> ForkHandle | None:
        return self.state.handle

    @property
    def max_branches(self) -> int:
        return self.options.max_branches

    @property
    def max_depth(self) -> int:
        return self.options.max_depth

    @property
    def is_resolved(self) -> bool:
        """True when no live branch state is owned: never forked, merged, or aborted."""
        return self.state.is_resolved

    @property
    def branches(self) -> dict[str, BranchRuntime]:
        return dict(self.state.branches)

    @property
    def _branches(self) -> dict[str, BranchRuntime]:
        """The live dict (what the review-delegating methods below read)."""
        return self.state.branches

    @property
    def parent_ws_id(self) -> str | None:
        """The workspace branch this fork was taken from (None: the workspace itself)."""
        return self.merger.parent_ws_id

    @property
    def parent_path(self) -> Path:
        return Path(self.parent_node.path)

    # -- events ----------------------------------------------------------------------------
    def subscribe(self, maxsize: int = 0) -> asyncio.Queue[ev.ForkEvent]:
        """A queue receiving every event from now on (state changes, text, tool calls...)."""
        return self._events.subscribe(maxsize)

    def unsubscribe(self, queue: asyncio.Queue[ev.ForkEvent]) -> None:
        self._events.unsubscribe(queue)

    def add_listener(self, callback: Callable[[ev.ForkEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event; returns a function that removes it."""
        return self._events.add_listener(callback)

    def publish(self, event: ev.ForkEvent) -> None:
        """Send ``event`` to every subscriber and listener (the mirror's edit relay uses it
        to announce the user's edits in a branch)."""
        self._events.publish(event)

    # -- lookup ------------------------------------------------------------------------------
    def _require_handle(self) -> ForkHandle:
        return self.state.require_handle()

    def get_branch(self, key: str) -> BranchRuntime:
        """A branch by id or by label."""
        return self.state.get_branch(key)

    # -- fork --------------------------------------------------------------------------------
    async def fork(
        self,
        specs: Sequence[BranchSpec | dict[str, Any]],
        *,
        parent_history: Sequence[ModelMessage],
        isolation: BranchIsolation | None = None,
        strategy: MergeStrategy | None = None,
        aggregate_budget_usd: float | None = None,
    ) -> ForkHandle:
        """Create one workspace branch and start one task per spec; returns at once
        (``fork/opening.py``)."""
        return await open_fork(
            self,
            specs,
            parent_history=parent_history,
            isolation=isolation,
            strategy=strategy,
            aggregate_budget_usd=aggregate_budget_usd,
        )

    # -- the user's edits in the mirror (fork/mirror/edits.py) ------------------------------
    def user_edits(self) -> dict[str, list[str]]:
        """label -> the paths the user edited in that branch's mirror directory (applied to
        the branch, or kept aside as a conflict): what a front end marks "edited by you".
        Empty without a mirror (``materialize=False``)."""
        hook = self.mirror_hook
        return hook.edits.edited_paths() if hook is not None else {}

    def edit_conflicts(self) -> dict[str, list[Any]]:
        """label -> ``EditConflict`` (path, where the user's version is kept) per branch."""
        hook = self.mirror_hook
        return dict(hook.edits.conflicts()) if hook is not None else {}

    # -- steering ----------------------------------------------------------------------------
    def steer(self, key: str, message: str) -> bool:
        """Send ``message`` to the branch with this label or id: it becomes part of that
        branch's very next model request (no other branch sees it).

        Returns True when it was handed to the live run, False when it is held for the
        branch's next request. A message the run was handed too late to send (it was
        finishing) is not lost: the branch gets it as its next turn, or, when it cannot go
        on, a :class:`BranchSteerUndelivered` event says so. Raises ``RuntimeError`` for a
        branch that is not running (use :meth:`run_on_branch` to start a new turn on a
        finished one).
        """
        rt = self.get_branch(key)
        if rt.state != "running":
            raise InvalidStateError(
                f"branch {rt.label} is {rt.state}; use run_on_branch to continue it"
            )
        if is_external(rt.spec.model):  # typed on the agent's terminal, if it reads one
            if rt.external is None or not rt.external.steer(message):
                raise InvalidStateError(f"branch {rt.label} ({rt.spec.model}) cannot be steered: "
                                   "it reads no input while it works")
            self.publish(ev.BranchSteered(fork_id=self.fork_id or "", branch_id=rt.branch_id,
                                           label=rt.label, message=message))
            return True
        delivered = rt.queue.put(message)
        self.publish(
            ev.BranchSteered(
                fork_id=self.fork_id or "", branch_id=rt.branch_id, label=rt.label, message=message
            )
        )
        return delivered

    async def run_on_branch(self, branch_id: str, user_message: str) -> asyncio.Task[None]:
        """Start a new turn on a finished branch; returns the branch's new task."""
        rt = self.get_branch(branch_id)
        if rt.state == "running":
            raise InvalidStateError(f"branch {rt.label} is still running; steer it instead")
        if rt.state == "awaiting_approval":
            raise InvalidStateError(f"branch {rt.label} waits for a tool approval; answer it first")
        if rt.ws_branch is None:
            raise InvalidStateError(f"branch {rt.label} was already {rt.resolution or 'released'}")
        history = rt.partial_history or list(rt.seed_history)
        rt.turns += 1
        return self.runner.start(rt, user_message, history)

    # -- nesting -----------------------------------------------------------------------------
    def nested(self, key: str | BranchRuntime) -> ForkCoordinator:
        """The coordinator for forks started from inside a branch (created on first use)."""
        rt = key if isinstance(key, BranchRuntime) else self.get_branch(key)
        if rt.child is None:
            rt.child = type(self)(
                self.agent,
                self.parent_deps,
                workspace=self.workspace,
                parent_node=rt.ws_branch,
                depth=self.depth + 1,
                store=self.store,
                checkpoint_store=self.checkpoints,
                parent_runtime=rt,
                parent_coordinator=self,
                options=replace(self.options, default_model=self.model_for(rt)),
            )
        return rt.child

    # -- termination ---------------------------------------------------------------------------
    async def terminate_branch(
        self, branch_id: str, *, reason: BranchState | None = None
    ) -> BranchStatus:
        """Cancel a running branch (state ``terminated``, or ``reason``); idempotent."""
        rt = self.get_branch(branch_id)
        task = rt.task
        if task is not None and not task.done():
            if rt.state == "running":
                self.runner.set_state(rt, reason or "terminated")
                task.cancel()
            # A task already told to stop (by an earlier, interrupted call) is still waited
            # for: its workspace branch must not be discarded under it.
            if task is not asyncio.current_task():
                await asyncio.wait([task])
        return rt.status()

    async def aclose(self) -> None:
        """Cancel everything and release the workspace branches (safe to call twice)."""
        if not self.is_resolved:
            await self.abort_fork()
        for rt in self.state.branches.values():
            if rt.task is not None and not rt.task.done():
                rt.task.cancel()
                # asyncio.wait never raises the task's own error; what it raises is the
                # caller's cancellation, which must reach the caller.
                await asyncio.wait([rt.task])

    # -- running (run_loop.BranchRunner, approvals.ApprovalBroker) -----------------------
    def model_for(self, rt: BranchRuntime) -> Any:
        """The model a branch runs with: its spec's model, else the parent run's."""
        return self.runner.model_for(rt)

    def capture_partial_history(self, branch_id: str, messages: Sequence[ModelMessage]) -> None:
        """Record a branch's latest message snapshot (ignored for unknown branches)."""
        rt = self.state.branches.get(branch_id)
        if rt is not None:
            rt.history = list(messages)

    def pending_approvals(self, key: str) -> list[ev.ApprovalCall]:
        """The tool calls the branch with this label or id waits on (empty if none)."""
        return list(self.get_branch(key).pending_approvals)

    async def approve(self, key: str, decisions: dict[str, bool | str]) -> asyncio.Task[None]:
        """Answer a paused branch's pending tool calls and resume it.

        ``decisions`` maps each pending ``tool_call_id`` to True (run it), False (deny), or a
        string (deny, with that message for the model). Calls left out are denied: a branch
        never runs a tool nobody approved.
        """
        rt = self.get_branch(key)
        results = self.runner.approvals.answers(rt, decisions)
        return self.runner.start(rt, None, list(rt.history), results)

    # -- inspection (inspection.py) ------------------------------------------------------
    def inspect_branches(self) -> list[BranchStatus]:
        return [rt.status() for rt in self.state.branches.values()]

    async def wait(
        self, timeout: float | None = None, branch_ids: Sequence[str] | None = None
    ) -> list[BranchStatus]:
        """Wait until the branches (all, or ``branch_ids``) are no longer running, or ``timeout``.

        Waits on the branch tasks themselves (no polling); returns the statuses either way.
        """
        selected = (
            [self.get_branch(k) for k in branch_ids]
            if branch_ids
            else list(self.state.branches.values())
        )
        await wait_for(selected, timeout)
        return self.inspect_branches()

    wait_branches = wait

    def fork_cost(self) -> ForkCostSummary:
        return fork_cost(self._require_handle(), self.state.branches.values(), self.default_model)

    def file_changes(self, key: str) -> list[FileChange]:
        """What a branch changed so far (tool writes and shell commands alike)."""
        return file_changes(self.get_branch(key))

    def diff(self, paths: list[str] | None = None) -> dict[str, Any]:
        """The cross-branch diff report as plain data (``BranchDiffReport.to_dict()``, built
        by this coordinator's review service; see :meth:`diff_report`)."""
        return self.diff_report(paths).to_dict()

    # -- ending the fork (merge.ForkMerger; every ending settles the ForkState) ----------
    async def abort_fork(self) -> list[str]:
        """Discard every branch (tasks cancelled, workspace branches aborted); returns their ids."""
        return await self.merger.abort()

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
        parsed here by ``MergeAction.parse`` and nowhere further in): ``pick`` merges that
        branch; ``abort`` discards them all; ``auto`` lets the judge pick and merges its
        pick (``judge_options`` go to :meth:`resolve`, e.g. ``judges=[...]``,
        ``test_command=...``); a judge that cannot name a branch raises ``RuntimeError``
        and nothing is merged; ``combine`` lands a selection (``fork.combine``; with the
        string form, ``selection=`` comes here).

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
        return await self.merger.merge(MergeAction.coerce(action), git=git, **judge_options)

    # -- state on disk (persistence.ForkRecorder) -----------------------------------------
    def _manifest(self) -> dict[str, Any] | None:
        if self.state.handle is None:
            return None
        return build_manifest(
            self.state,
            parent_workspace_branch_id=self.parent_ws_id,
            parent_fork_id=self.parent_coordinator.fork_id if self.parent_coordinator else None,
            max_branches=self.max_branches,
            max_depth=self.max_depth,
        )

    async def _save_settled(self) -> None:
        await self.recorder.save_settled()

    def _prune_later(self) -> None:
        self.recorder.prune_later()

    async def rewind_to_checkpoint(self, checkpoint_id: str) -> list[ModelMessage]:
        """Restore ``fork:<id>`` / ``post-fork:<id>`` (files + history) into the parent."""
        await self.flush()
        return await asyncio.to_thread(self.checkpoints.rewind, checkpoint_id, self.parent_path)

    async def flush(self) -> None:
        """Wait until every state change (and post-fork checkpoint) so far is on disk."""
        await self.recorder.flush()

    async def release_networks(self) -> None:
        """End every branch's network, services and port forwards now, keeping the fork
        (for a front end that leaves it open for recovery: no process outlives it)."""
        networks = getattr(self.branch_files, "networks", None)
        if networks is not None:
            await asyncio.to_thread(networks.close_all)

    @classmethod
    def recover(
        cls,
        workspace: Workspace | str | os.PathLike[str],
        agent: Any = None,
        *,
        options: ForkOptions | None = None,
        **option_overrides: Any,
    ) -> list[Self]:
        """Rebuild a coordinator for every fork left open under ``workspace`` (e.g. after a crash).

        Branches that were running when their process died become ``terminated`` (their
        error says why); every branch keeps its partial history and its durable workspace
        branch, so the fork can be inspected, continued (:meth:`run_on_branch`), merged or
        aborted. Outer forks are recovered before the forks nested in their branches.
        ``options`` (and keyword overrides of its fields) apply to every recovered fork;
        each keeps the branch and depth limits its manifest recorded.
        """
        return recover_forks(cls, workspace, agent, options=options, **option_overrides)

    # -- review (branching_core.review, the layer below: typed, no port) ----------------
    def diff_report(self, paths: list[str] | None = None) -> BranchDiffReport:
        """The typed cross-branch ``BranchDiffReport`` (see ``review.build_diff_report``)."""
        from branching_core.review.diff_report import build_diff_report, user_edit_marks

        handle = self._require_handle()
        return build_diff_report(
            handle.fork_id,
            list(self.state.branches.values()),
            paths,
            parent_path=self.parent_path,
            user_edits=user_edit_marks(self),
        )

    async def resolve(
        self,
        strategy: MergeStrategy | None = None,
        *,
        goal: str | None = None,
        judges: Sequence[ModelChoice] | None = None,
        test_command: str | None = None,
        test_timeout_s: float | None = None,
        test_limits: ResourceLimits | None = None,
        settings: Settings | None = None,
        commit: bool = False,
        wait_timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ResolveOutcome:
        """Settle the fork with a judge per ``strategy`` (see ``review.resolver.resolve``)."""
        from branching_core.review.resolver import resolve

        return await resolve(
            self,
            strategy,
            goal=goal,
            judges=judges,
            test_command=test_command,
            test_timeout_s=test_timeout_s,
            test_limits=test_limits,
            settings=settings,
            commit=commit,
            wait_timeout=wait_timeout,
            env=env,
        )

    def process_report(self) -> ProcessReport:
        """Each branch's tool calls, aligned, where they diverged (``review.process_report``)."""
        from branching_core.review.process_report import build_process_report

        return build_process_report(
            self.state.branches.values(), price_fn=self.price_fn, edits=self.user_edits()
        )

    def combine_preview(self, selection: Selection, *, base: str | None = None) -> CombinePlan:
        """Plan ``merge_or_select("combine", selection=...)`` without writing anything."""
        from branching_core.fork.combine import plan_combination

        return plan_combination(self, selection, base=base)

    def estimate(
        self,
        specs: Sequence[BranchSpec | dict[str, Any]],
        parent_history: Sequence[ModelMessage],
        *,
        avg_requests: float | None = None,
        aggregate_budget_usd: float | None = None,
    ) -> ForkEstimate:
        """Estimated cost of forking ``specs`` now (``fork.estimate.estimate_fork``)."""
        from branching_core.fork.estimate import estimate_fork

        model = self.default_model or getattr(self.agent, "model", None)
        return estimate_fork(
            specs,
            parent_history,
            default_model=model,
            price_fn=self.price_fn,
            avg_requests=avg_requests,
            aggregate_budget_usd=aggregate_budget_usd,
        )


__all__ = [
    "INTERRUPTED",
    "BranchRunContext",
    "BranchRuntime",
    "ForkCoordinator",
    "current_branch",
    "list_open_forks",
    "states_final",
]
