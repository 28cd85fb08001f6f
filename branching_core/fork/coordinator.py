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
termination. The rest is in parts with one job each (all mixed into this class, declared
in ``parts.py``):

* ``runtime.py``      ``BranchRuntime`` (one branch's live state), ``current_branch()``
* ``run_loop.py``     starting a branch, ``agent.iter()``, streaming, the budget check
* ``approvals.py``    pausing on tool approvals, ``approve()``
* ``inspection.py``   ``inspect_branches``, ``wait``, ``fork_cost``, ``file_changes``, ``diff``
* ``merge.py``        ``merge_or_select``, ``abort_fork``, landing the winner in the parent
* ``persistence.py``  manifest and history saves, ``recover()``, ``list_open_forks``
* ``state_writer.py`` the coalescing background writer; ``mirror/`` the on-disk mirror

Why ~500 lines: the public surface itself (construction from ``ForkOptions``, the
event hub, ``fork()``, steering, ``nested()``, termination and the read-only
properties front ends use) is what a reader of this class needs on one page; every
part with a job of its own already lives in the modules above.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelMessage

from branching_core.agent.hub import EventHub
from branching_core.fork import events as ev
from branching_core.fork.approvals import Approvals, approval_predicate
from branching_core.fork.branch_files import BranchFiles, branch_files_for
from branching_core.fork.branch_network import ForkNetworks
from branching_core.fork.budget import PriceFn, default_price
from branching_core.fork.checkpoints import CheckpointStore
from branching_core.fork.external_branch import is_external
from branching_core.fork.history import copy_history, dumps_history
from branching_core.fork.inspection import Inspection
from branching_core.fork.merge import Merging
from branching_core.fork.mirror import ForkMaterializer
from branching_core.fork.options import DepsFactory, ForkOptions, ModelResolver
from branching_core.fork.persistence import Persistence, list_open_forks
from branching_core.fork.run_loop import RunLoop
from branching_core.fork.runtime import (
    INTERRUPTED,
    BranchRunContext,
    BranchRuntime,
    as_workspace,
    current_branch,
    states_final,
    ws_name,
)
from branching_core.fork.state_writer import StateWriter
from branching_core.fork.store import ForkStore
from branching_core.fork.types import (
    BranchIsolation,
    BranchSpec,
    BranchState,
    BranchStatus,
    ForkBranchLimitError,
    ForkDepthLimitError,
    ForkHandle,
    MergeStrategy,
)
from branching_core.workspace import Workspace
from branching_core.workspace.journal import crash_point

if TYPE_CHECKING:  # the review layer is imported when used: a fork alone never loads it
    from branching_core.config.schema import Settings
    from branching_core.fork.combine import CombinePlan, Selection
    from branching_core.fork.estimate import ForkEstimate
    from branching_core.review.process_report import ProcessReport
    from branching_core.review.resolver import ModelChoice
    from branching_core.review.types import BranchDiffReport, ResolveOutcome
    from branching_core.sandbox import ResourceLimits

log = logging.getLogger(__name__)


class ForkCoordinator(RunLoop, Approvals, Inspection, Merging, Persistence):
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
        self._handle: ForkHandle | None = None
        self._branches: dict[str, BranchRuntime] = {}
        self._resolved = False
        self._resolution: str | None = None
        self._post_checkpoint: str | None = None
        self._resolved_at: float | None = None
        self._lock = asyncio.Lock()
        self._events: EventHub[ev.ForkEvent] = EventHub("fork event")
        self.recovery_errors: list[str] = []
        self.save_errors: list[str] = []
        """Every failed save of fork state (each is also logged and set on its branch)."""
        self._writer = StateWriter(self.store, self._save_failed)
        self.branch_files: BranchFiles = branch_files_for(
            self.options.runner, command_runner=self.options.command_runner,
            live_view=self.options.materialize,
            networks=ForkNetworks(self.options.network) if self.options.network else None,
        )
        """Where this fork's branch files live and how their tools reach them."""
        self._background: set[asyncio.Task[Any]] = set()
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
        return self._handle.fork_id if self._handle else None

    @property
    def handle(self) -> ForkHandle | None:
        return self._handle

    @property
    def max_branches(self) -> int:
        return self.options.max_branches

    @property
    def max_depth(self) -> int:
        return self.options.max_depth

    @property
    def is_resolved(self) -> bool:
        """True when no live branch state is owned: never forked, merged, or aborted."""
        return self._handle is None or self._resolved

    @property
    def branches(self) -> dict[str, BranchRuntime]:
        return dict(self._branches)

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

    def _publish(self, event: ev.ForkEvent) -> None:
        self._events.publish(event)

    # -- lookup ------------------------------------------------------------------------------
    def _require_handle(self) -> ForkHandle:
        if self._handle is None:
            raise RuntimeError("no fork yet: call fork() (or the fork_run tool) first")
        return self._handle

    def get_branch(self, key: str) -> BranchRuntime:
        """A branch by id or by label."""
        rt = self._branches.get(key)
        if rt is not None:
            return rt
        matches = [r for r in self._branches.values() if r.label == key]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            known = ", ".join(f"{r.label} ({r.branch_id})" for r in self._branches.values())
            raise ValueError(f"no branch {key!r}; branches: {known or 'none'}")
        raise ValueError(f"label {key!r} is ambiguous; use a branch id")

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
        """Create one workspace branch and start one task per spec; returns at once."""
        async with self._lock:
            if self._handle is not None and not self._resolved:
                raise RuntimeError(f"fork {self.fork_id} is still open: merge or abort it first")
            if self.agent is None:
                raise RuntimeError("this coordinator has no agent to run branches with")
            spec_list = [
                s if isinstance(s, BranchSpec) else BranchSpec.from_json(dict(s)) for s in specs
            ]
            if not spec_list:
                raise ValueError("a fork needs at least one branch spec")
            if len(spec_list) > self.max_branches:
                raise ForkBranchLimitError(
                    f"{len(spec_list)} branches requested; max_branches is {self.max_branches}"
                )
            if self.depth + 1 > self.max_depth:
                raise ForkDepthLimitError(
                    f"a fork here would be {self.depth + 1} levels deep; "
                    f"max_depth is {self.max_depth}"
                )
            labels = [s.label.strip() for s in spec_list]
            if any(not label for label in labels) or len(set(labels)) != len(labels):
                raise ValueError(f"branch labels must be non-empty and unique: {labels}")
            for spec in spec_list:
                if spec.budget_usd is not None and spec.budget_usd < 0:
                    raise ValueError(f"budget_usd of {spec.label!r} is negative")

            fork_id = uuid.uuid4().hex[:12]
            seed = copy_history(parent_history)
            seed_json = dumps_history(seed)
            runtimes: list[BranchRuntime] = []
            # The intent comes first: a process killed from here until the full manifest is
            # written leaves durable branches that fork/sweep.py finds and aborts.
            self.store.write_manifest(
                {
                    "fork_id": fork_id,
                    "creating": True,
                    "pid": os.getpid(),
                    "created_at": time.time(),
                    "depth": self.depth + 1,
                    "resolved": False,
                    "branches": [],
                }
            )
            crash_point("fork:intent")
            ws_branches = self.branch_files.open(
                self.parent_node,
                [ws_name(spec.label, fork_id, i) for i, spec in enumerate(spec_list)],
            )
            try:
                for index, (spec, ws_branch) in enumerate(zip(spec_list, ws_branches, strict=True)):
                    runtimes.append(
                        BranchRuntime(
                            branch_id=f"{fork_id[:6]}-{index}-{uuid.uuid4().hex[:4]}",
                            label=spec.label.strip(),
                            spec=spec,
                            index=index,
                            depth=self.depth + 1,
                            ws_branch=ws_branch,
                            workspace_branch_id=ws_branch.id,
                            path=Path(ws_branch.path),
                            seed_history=seed,
                            history=list(seed),
                        )
                    )
            except BaseException:
                for ws_branch in ws_branches:
                    with contextlib.suppress(Exception):
                        ws_branch.abort()
                self.store.remove(fork_id)
                raise
            crash_point("fork:branches")

            self._branches = {rt.branch_id: rt for rt in runtimes}
            self._resolved = False
            self._resolved_at = None
            self._resolution = None
            self._post_checkpoint = None
            parent_ws_id = (
                getattr(self.parent_node, "id", None)
                if self.parent_node is not self.workspace
                else None
            )
            checkpoint_id = self.checkpoints.save(
                fork_id, "fork", seed_json, parent_workspace_branch_id=parent_ws_id
            )
            self._handle = ForkHandle(
                fork_id=fork_id,
                branches=[rt.branch_id for rt in runtimes],
                labels={rt.branch_id: rt.label for rt in runtimes},
                depth=self.depth + 1,
                parent_checkpoint_id=checkpoint_id,
                merge_strategy=strategy or MergeStrategy(),
                isolation=isolation or BranchIsolation(),
                aggregate_budget_usd=aggregate_budget_usd,
                parent_branch_id=self.parent_runtime.branch_id if self.parent_runtime else None,
                created_at=time.time(),
            )
            self.store.write_history(fork_id, "parent", seed_json)
            # Not fsync'ed: the rename is atomic against a killed process, and fork() must stay
            # cheap (the workspace branches themselves are durable).
            self._persist(now=True)
            crash_point("fork:manifest")
            self._publish(ev.ForkCreated(fork_id=fork_id, branch_ids=tuple(self._handle.branches)))
            for rt in runtimes:
                # An empty steer sends no new prompt: the branch runs on from the seed (a
                # seed ending in the user's request re-samples that turn: best-of-N).
                self._start(rt, rt.spec.steer.strip() or None, seed)
            return self._handle

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
            raise RuntimeError(f"branch {rt.label} is {rt.state}; use run_on_branch to continue it")
        if is_external(rt.spec.model):  # typed on the agent's terminal, if it reads one
            if rt.external is None or not rt.external.steer(message):
                raise RuntimeError(f"branch {rt.label} ({rt.spec.model}) cannot be steered: "
                                   "it reads no input while it works")
            self._publish(ev.BranchSteered(fork_id=self.fork_id or "", branch_id=rt.branch_id,
                                           label=rt.label, message=message))
            return True
        delivered = rt.queue.put(message)
        self._publish(
            ev.BranchSteered(
                fork_id=self.fork_id or "", branch_id=rt.branch_id, label=rt.label, message=message
            )
        )
        return delivered

    async def run_on_branch(self, branch_id: str, user_message: str) -> asyncio.Task[None]:
        """Start a new turn on a finished branch; returns the branch's new task."""
        rt = self.get_branch(branch_id)
        if rt.state == "running":
            raise RuntimeError(f"branch {rt.label} is still running; steer it instead")
        if rt.state == "awaiting_approval":
            raise RuntimeError(f"branch {rt.label} waits for a tool approval; answer it first")
        if rt.ws_branch is None:
            raise RuntimeError(f"branch {rt.label} was already {rt.resolution or 'released'}")
        history = rt.partial_history or list(rt.seed_history)
        rt.turns += 1
        return self._start(rt, user_message, history)

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
                self._set_state(rt, reason or "terminated")
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
        for rt in self._branches.values():
            if rt.task is not None and not rt.task.done():
                rt.task.cancel()
                # asyncio.wait never raises the task's own error; what it raises is the
                # caller's cancellation, which must reach the caller.
                await asyncio.wait([rt.task])

    # -- review (branching_core.review, the layer below: typed, no port) ----------------
    def diff_report(self, paths: list[str] | None = None) -> BranchDiffReport:
        """The typed cross-branch ``BranchDiffReport`` (see ``review.build_diff_report``)."""
        from branching_core.review.diff_report import build_diff_report, user_edit_marks

        handle = self._require_handle()
        return build_diff_report(
            handle.fork_id,
            list(self._branches.values()),
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
            self._branches.values(), price_fn=self.price_fn, edits=self.user_edits()
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
