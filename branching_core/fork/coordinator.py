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
to its events (:meth:`subscribe`, :meth:`add_listener`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart

from branching_core.agent.model_errors import describe_error
from branching_core.agent.spend import SPEND
from branching_core.agent.subagents.merge import landing_lock
from branching_core.errors import ConflictError
from branching_core.fork import events as ev
from branching_core.fork.budget import BranchMeter, PriceFn, aggregate_over, default_price
from branching_core.fork.checkpoints import CheckpointStore, HeldFiles
from branching_core.fork.diffs import diff_report
from branching_core.fork.history import (
    copy_history,
    dumps_history,
    load_history,
    trim_unanswered_tool_calls,
)
from branching_core.fork.model_run import (
    branch_spend,
    budget_rule_text,
    history_estimated,
    response_started,
    spend_reason_after,
)
from branching_core.fork.options import ApprovalPolicy, DepsFactory, ForkOptions, ModelResolver
from branching_core.fork.retention import prune_resolved
from branching_core.fork.steering import SteeringQueue
from branching_core.fork.store import ForkStore
from branching_core.fork.sweep import sweep_interrupted_forks
from branching_core.fork.types import (
    SETTLED_STATES,
    BranchCost,
    BranchIsolation,
    BranchResolution,
    BranchSpec,
    BranchState,
    BranchStatus,
    FileChange,
    FlushError,
    FlushReport,
    ForkBranchLimitError,
    ForkCostSummary,
    ForkDepthLimitError,
    ForkHandle,
    MergeResult,
    MergeStrategy,
)
from branching_core.workspace import Workspace
from branching_core.workspace.apply import apply_paths, changed_since
from branching_core.workspace.journal import crash_point

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted: the process running this branch exited"


@dataclass
class BranchRunContext:
    """What a branch's agent run knows about itself (set in the branch task's context)."""

    coordinator: ForkCoordinator
    runtime: BranchRuntime


_BRANCH_CTX: contextvars.ContextVar[BranchRunContext | None] = contextvars.ContextVar(
    "forkdeck_branch", default=None
)


def current_branch() -> BranchRunContext | None:
    """The branch the calling code runs in (``None`` in a parent run)."""
    return _BRANCH_CTX.get()


@dataclass(eq=False)
class BranchRuntime:
    """Live state of one branch (owned by its coordinator; read it, don't write it)."""

    branch_id: str
    label: str
    spec: BranchSpec
    index: int
    depth: int
    ws_branch: Any = None
    """The ``branching_core.workspace.Branch``; ``None`` once merged or discarded."""
    workspace_branch_id: str | None = None
    path: Path | None = None
    state: BranchState = "running"
    resolution: BranchResolution | None = None
    task: asyncio.Task[None] | None = None
    history: list[ModelMessage] = field(default_factory=list)
    """Latest snapshot of the branch's messages (partial while running or when stopped)."""
    seed_history: list[ModelMessage] = field(default_factory=list)
    meter: BranchMeter = field(default_factory=BranchMeter)
    queue: SteeringQueue = field(default_factory=SteeringQueue)
    error: str | None = None
    output: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    tool_calls: int = 0
    turns: int = 1
    child: ForkCoordinator | None = None
    pending_approvals: list[ev.ApprovalCall] = field(default_factory=list)
    """Tool calls waiting for :meth:`ForkCoordinator.approve` (state ``awaiting_approval``)."""
    save_error: str | None = None
    """Why the latest save of this branch's state or history failed (logged too)."""
    _done: asyncio.Event | None = None

    @property
    def overlay(self) -> Any:
        """Seed-004 name for the branch's isolated file state (here: the workspace branch)."""
        return self.ws_branch

    @property
    def partial_history(self) -> list[ModelMessage]:
        return trim_unanswered_tool_calls(self.history)

    def status(self) -> BranchStatus:
        return BranchStatus(
            branch_id=self.branch_id,
            label=self.label,
            state=self.state,
            model=self.spec.model,
            depth=self.depth,
            workspace_branch_id=self.workspace_branch_id,
            path=str(self.path) if self.path is not None else None,
            cost_usd=self.meter.cumulative_usd,
            budget_usd=self.spec.budget_usd,
            requests=self.meter.requests,
            tool_calls=self.tool_calls,
            messages=len(self.history),
            error=self.error,
            output=self.output,
            resolution=self.resolution,
            started_at=self.started_at,
            finished_at=self.finished_at,
            save_error=self.save_error,
        )


SaveErrorHandler = Callable[[str, str, BaseException], None]


class _StateWriter:
    """Writes per-step fork state off the event loop, coalescing bursts.

    Branch steps submit the latest manifest / history payloads; one drain task writes them
    in a worker thread. If a branch produces several snapshots before the previous write
    finished, only the newest is written (each write is still atomic). ``flush()`` waits
    until everything submitted so far is on disk.
    """

    def __init__(self, store: ForkStore, on_error: SaveErrorHandler) -> None:
        self.store = store
        self.on_error = on_error
        self.pending: dict[tuple[str, str], Any] = {}
        self.task: asyncio.Task[None] | None = None

    def submit(self, fork_id: str, name: str, payload: Any) -> None:
        self.pending[(fork_id, name)] = payload
        if self.task is None or self.task.done():
            try:
                self.task = asyncio.get_running_loop().create_task(self._drain())
            except RuntimeError:  # no loop: write now
                self._write_all()

    def _write_all(self) -> None:
        while self.pending:
            (fork_id, name), payload = self.pending.popitem()
            self._write(fork_id, name, payload)

    def _write(self, fork_id: str, name: str, payload: Any) -> None:
        try:
            if name == "manifest":
                self.store.write_manifest(payload)
            else:
                self.store.write_history(fork_id, name, payload)
        except Exception as exc:  # reported (logged and shown on the branch), never lost
            self.on_error(fork_id, name, exc)

    async def _drain(self) -> None:
        while self.pending:
            key = next(iter(self.pending))
            payload = self.pending.pop(key)
            await asyncio.to_thread(self._write, key[0], key[1], payload)

    async def flush(self) -> None:
        while self.task is not None and not self.task.done():
            await asyncio.shield(self.task)


def _approval_predicate(
    policy: ApprovalPolicy | None,
) -> Callable[[str, dict[str, Any]], bool] | None:
    if policy is None or policy is False:
        return None
    if policy is True:
        return lambda _name, _args: True
    if callable(policy):
        return policy
    names = frozenset(policy)
    return lambda name, _args: name in names


def _with_deferred_output(output_type: Any) -> list[Any]:
    """The agent's output type plus ``DeferredToolRequests``, so a branch run that hits a
    tool needing approval ends with the pending calls instead of raising."""
    base = list(output_type) if isinstance(output_type, list | tuple) else [output_type]
    return base if DeferredToolRequests in base else [*base, DeferredToolRequests]


def _ws_name(label: str, fork_id: str, index: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip(".-")[:40] or "branch"
    return f"fork-{fork_id}-{index}-{safe}"


def _as_workspace(workspace: Workspace | str | os.PathLike[str]) -> Workspace:
    return workspace if isinstance(workspace, Workspace) else Workspace(workspace)


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
        self.workspace = _as_workspace(workspace)
        self.parent_node = parent_node if parent_node is not None else self.workspace
        self.depth = depth
        self.store = store or ForkStore(self.workspace.path)
        self.checkpoints = checkpoint_store or CheckpointStore(self.store)
        self.parent_runtime = parent_runtime
        self.parent_coordinator = parent_coordinator
        self.approval_required = _approval_predicate(self.options.approval_required)
        self._handle: ForkHandle | None = None
        self._branches: dict[str, BranchRuntime] = {}
        self._resolved = False
        self._resolution: str | None = None
        self._post_checkpoint: str | None = None
        self._resolved_at: float | None = None
        self._lock = asyncio.Lock()
        self._queues: list[asyncio.Queue[ev.ForkEvent]] = []
        self._listeners: list[Callable[[ev.ForkEvent], None]] = []
        self.recovery_errors: list[str] = []
        self.save_errors: list[str] = []
        """Every failed save of fork state (each is also logged and set on its branch)."""
        self._writer = _StateWriter(self.store, self._save_failed)
        self._background: set[asyncio.Task[Any]] = set()
        # On-disk mirror for diff tools (branching_core.review.materializer); nested
        # coordinators inherit the setting with their options.
        self.mirror_hook: Any = None
        if self.materialize:
            from branching_core.review.materializer import ForkMaterializer

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
        queue: asyncio.Queue[ev.ForkEvent] = asyncio.Queue(maxsize)
        self._queues.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[ev.ForkEvent]) -> None:
        with contextlib.suppress(ValueError):
            self._queues.remove(queue)

    def add_listener(self, callback: Callable[[ev.ForkEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event; returns a function that removes it."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def _publish(self, event: ev.ForkEvent) -> None:
        for queue in list(self._queues):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(event)
        for callback in list(self._listeners):
            try:
                callback(event)
            except Exception:  # a broken listener must not break a branch
                log.exception("fork event listener failed")

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
            ws_branches = self.parent_node.branch_many(
                [_ws_name(spec.label, fork_id, i) for i, spec in enumerate(spec_list)],
                on_success=None,
                on_error=None,
                durable=True,
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
                self._start(rt, rt.spec.steer, seed)
            return self._handle

    # -- running a branch ----------------------------------------------------------------------
    def _start(
        self,
        rt: BranchRuntime,
        prompt: str | None,
        history: list[ModelMessage],
        deferred: DeferredToolResults | None = None,
    ) -> asyncio.Task[None]:
        rt.state = "running"
        rt.error = None
        rt.pending_approvals = []
        rt.started_at = time.time()
        rt.finished_at = None
        rt._done = asyncio.Event()
        rt.task = asyncio.create_task(
            self._run_branch(rt, prompt, history, deferred),
            name=f"fork-{self.fork_id}-{rt.label}",
        )
        self._publish(
            ev.BranchStateChanged(
                fork_id=self.fork_id or "", branch_id=rt.branch_id, label=rt.label, state="running"
            )
        )
        return rt.task

    def model_for(self, rt: BranchRuntime) -> Any:
        """The model a branch runs with: its spec's model, else the parent run's."""
        if rt.spec.model:
            if self.model_resolver is not None:
                return self.model_resolver(rt.spec.model)
            from branching_core.fork.model_run import resolve_branch_model

            return resolve_branch_model(rt.spec.model, self.default_model)
        return self.default_model

    def _run_kwargs(self, rt: BranchRuntime, history: list[ModelMessage]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"message_history": history}
        deps = self.deps_factory(self.parent_deps, rt) if self.deps_factory else self.parent_deps
        if deps is not None:
            kwargs["deps"] = deps
        model = self.model_for(rt)
        if model is not None:
            kwargs["model"] = model
        if rt.spec.extra_instructions:
            kwargs["instructions"] = rt.spec.extra_instructions
        if self.provide_workspace_tools:
            from branching_core.agent import create_workspace_toolset

            toolset: Any = create_workspace_toolset(rt.path, command_runner=self.command_runner)
            if self.approval_required is not None:
                needs = self.approval_required
                toolset = toolset.approval_required(
                    lambda _ctx, tool_def, args: needs(tool_def.name, args)
                )
            kwargs["toolsets"] = [toolset]
        kwargs["output_type"] = _with_deferred_output(self.agent.output_type)
        if self.usage_limits is not None:
            kwargs["usage_limits"] = self.usage_limits
        return kwargs

    async def _run_branch(
        self,
        rt: BranchRuntime,
        prompt: str | None,
        history: list[ModelMessage],
        deferred: DeferredToolResults | None = None,
    ) -> None:
        token = _BRANCH_CTX.set(BranchRunContext(self, rt))
        run: Any = None
        fid = self.fork_id or ""
        kwargs: dict[str, Any] = {}
        try:
            # Inside the try: a model that cannot be resolved fails the branch with the reason.
            kwargs = self._run_kwargs(rt, history)
            if deferred is not None:
                kwargs["deferred_tool_results"] = deferred
            SPEND.set(branch_spend(rt, kwargs.get("model") or self.agent.model, self._cut,
                                   self._publish, fid))
            async with self.agent.iter(prompt, **kwargs) as run:
                rt.queue.attach(run)
                async for node in run:
                    rt.history = list(run.all_messages())
                    if Agent.is_call_tools_node(node):
                        response: ModelResponse = node.model_response
                        stop = self._account(rt, response)
                        for part in response.parts:
                            if isinstance(part, TextPart) and part.content and not self.stream_text:
                                self._publish(
                                    ev.BranchTextDelta(
                                        fork_id=fid,
                                        branch_id=rt.branch_id,
                                        label=rt.label,
                                        text=part.content,
                                    )
                                )
                        self._save_history(rt)
                        if stop:
                            return
                        async with node.stream(run.ctx) as stream:
                            async for event in stream:
                                self._on_tool_event(rt, event)
                    elif self.stream_text and Agent.is_model_request_node(node):
                        self._publish(response_started(fid, rt, node))
                        async with node.stream(run.ctx) as stream:
                            async for event in stream:
                                self._on_stream_event(rt, event)
                result = run.result
            assert result is not None
            rt.history = list(result.all_messages())
            if isinstance(result.output, DeferredToolRequests):
                self._await_approval(rt, result.output)
            else:
                rt.output = result.output if isinstance(result.output, str) else repr(result.output)
                if rt.state == "running":
                    self._set_state(rt, "done", persist=False)
        except asyncio.CancelledError:
            if run is not None:
                rt.history = list(run.all_messages())
            if rt.state == "running":
                self._set_state(rt, "terminated", persist=False)
        except Exception as exc:
            if run is not None:
                rt.history = list(run.all_messages())
            rt.error = describe_error(exc, kwargs.get("model"), rt.history)
            if rt.state == "running":
                self._set_state(rt, "failed", persist=False)
        finally:
            left = rt.queue.detach(rt.history)  # steers no request carried
            _BRANCH_CTX.reset(token)
            rt.finished_at = time.time()
            self._save_history(rt)  # each save on its own: one failing never skips the other
            self._persist_or_report(rt)
            if rt._done is not None:
                rt._done.set()
            if left and rt.state != "awaiting_approval":  # (a resumed run gets them at once)
                asyncio.get_running_loop().call_soon(self._deliver_left_steers, rt)

    def _deliver_left_steers(self, rt: BranchRuntime) -> None:
        """Send the steers a finished run never carried as the branch's next turn, or, when
        the branch cannot go on, report them undelivered (:class:`BranchSteerUndelivered`)."""
        if rt.task is not None and not rt.task.done():
            return  # a new run started meanwhile: it was handed them when it attached
        messages = rt.queue.take_held()
        if not messages:
            return
        if rt.state == "done" and rt.ws_branch is not None and not self._lock.locked():
            rt.turns += 1
            history = rt.partial_history or list(rt.seed_history)
            self._start(rt, "\n\n".join(messages), history)
            rt.queue.delivered.extend(messages)
            return
        reason = (
            "the fork is being resolved"
            if self._lock.locked() or rt.ws_branch is None
            else f"the branch is {rt.state}"
        )
        log.warning("steer to %s not delivered: %s", rt.label, reason)
        self._publish(
            ev.BranchSteerUndelivered(
                fork_id=self.fork_id or "",
                branch_id=rt.branch_id,
                label=rt.label,
                messages=tuple(messages),
                reason=reason,
            )
        )

    def _on_tool_event(self, rt: BranchRuntime, event: Any) -> None:
        kind = getattr(event, "event_kind", "")
        part = getattr(event, "part", None)
        fid = self.fork_id or ""
        if kind == "function_tool_call" and part is not None:
            rt.tool_calls += 1
            self._publish(
                ev.BranchToolCall(
                    fork_id=fid,
                    branch_id=rt.branch_id,
                    label=rt.label,
                    tool_name=part.tool_name,
                    args=part.args,
                    tool_call_id=part.tool_call_id,
                )
            )
        elif kind == "function_tool_result" and part is not None:
            content = getattr(part, "content", "")
            self._publish(
                ev.BranchToolResult(
                    fork_id=fid,
                    branch_id=rt.branch_id,
                    label=rt.label,
                    tool_name=getattr(part, "tool_name", ""),
                    content=content if isinstance(content, str) else repr(content),
                    tool_call_id=getattr(part, "tool_call_id", ""),
                )
            )

    def _cut(self, rt: BranchRuntime, reason: str) -> None:
        """A budget or token cap was crossed mid-stream: the branch stops with that reason."""
        if rt.state == "running":
            rt.error = reason
            self._set_state(rt, "budget_exhausted")

    def _on_stream_event(self, rt: BranchRuntime, event: Any) -> None:
        text = None
        if getattr(event, "event_kind", "") == "part_start" and isinstance(event.part, TextPart):
            text = event.part.content
        elif getattr(event, "event_kind", "") == "part_delta":
            text = getattr(event.delta, "content_delta", None)
        if text:
            self._publish(
                ev.BranchTextDelta(
                    fork_id=self.fork_id or "", branch_id=rt.branch_id, label=rt.label, text=text
                )
            )

    def _set_state(self, rt: BranchRuntime, state: BranchState, *, persist: bool = True) -> None:
        rt.state = state
        self._publish(
            ev.BranchStateChanged(
                fork_id=self.fork_id or "",
                branch_id=rt.branch_id,
                label=rt.label,
                state=state,
                error=rt.error,
            )
        )
        if persist:
            self._persist_or_report(rt)

    # -- budgets ---------------------------------------------------------------------------
    def _account(self, rt: BranchRuntime, response: ModelResponse) -> bool:
        """Price one response; True when this branch must stop now."""
        rt.meter.add(response, self.price_fn)
        self._publish(
            ev.BranchCostUpdated(
                fork_id=self.fork_id or "",
                branch_id=rt.branch_id,
                label=rt.label,
                cumulative_usd=rt.meter.cumulative_usd,
            )
        )
        if rt.state != "running":
            return True
        cap = self._handle.aggregate_budget_usd if self._handle else None
        has_cap = rt.spec.budget_usd is not None or cap is not None
        if has_cap and rt.meter.price_error and self.options.on_unknown_price == "stop":
            rt.error = f"cost unknown, so the budget cannot be checked: {rt.meter.price_error}"
            self._set_state(rt, "budget_unknown")
            return True
        if rt.meter.over(rt.spec.budget_usd):
            rt.error = f"budget ${rt.spec.budget_usd:g} exhausted (spent ${rt.meter.cost_usd:.6f})"
            self._set_state(rt, "budget_exhausted")
            return True
        if (reason := spend_reason_after(rt.meter, response)) is not None:
            rt.error = reason  # a token cap (unpriced model) or a user price crossed
            self._set_state(rt, "budget_exhausted")
            return True
        if aggregate_over([r.meter for r in self._branches.values()], cap):
            total = sum(r.meter.cost_usd for r in self._branches.values())
            for other in self._branches.values():
                if other.state != "running":
                    continue
                other.error = f"aggregate budget ${cap:g} exhausted (fork spent ${total:.6f})"
                self._set_state(other, "aggregate_budget_exhausted")
                if other is not rt and other.task is not None and not other.task.done():
                    other.task.cancel()
            return True
        return False

    def capture_partial_history(self, branch_id: str, messages: Sequence[ModelMessage]) -> None:
        """Record a branch's latest message snapshot (ignored for unknown branches)."""
        rt = self._branches.get(branch_id)
        if rt is not None:
            rt.history = list(messages)

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

    # -- tool approvals ------------------------------------------------------------------------
    def _await_approval(self, rt: BranchRuntime, requests: DeferredToolRequests) -> None:
        if requests.calls:
            names = ", ".join(sorted({c.tool_name for c in requests.calls}))
            rt.error = f"tools run outside the agent are not supported in a branch: {names}"
            if rt.state == "running":
                self._set_state(rt, "failed", persist=False)
            return
        calls = [
            ev.ApprovalCall(tool_call_id=c.tool_call_id, tool_name=c.tool_name, args=c.args)
            for c in requests.approvals
        ]
        rt.pending_approvals = calls
        if rt.state != "running":
            return
        self._set_state(rt, "awaiting_approval", persist=False)
        self._publish(
            ev.BranchApprovalRequested(
                fork_id=self.fork_id or "",
                branch_id=rt.branch_id,
                label=rt.label,
                calls=tuple(calls),
            )
        )

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
        if rt.state != "awaiting_approval" or not rt.pending_approvals:
            raise RuntimeError(f"branch {rt.label} is {rt.state}; it waits on no approval")
        unknown = set(decisions) - {c.tool_call_id for c in rt.pending_approvals}
        if unknown:
            raise ValueError(f"no pending tool call with id {sorted(unknown)[0]!r}")
        answers: dict[str, bool | ToolDenied] = {}
        for call in rt.pending_approvals:
            answer = decisions.get(call.tool_call_id, False)
            if answer is True:
                answers[call.tool_call_id] = True
            else:
                reason = answer if isinstance(answer, str) else "The user denied this tool call."
                answers[call.tool_call_id] = ToolDenied(reason)
        return self._start(rt, None, list(rt.history), DeferredToolResults(approvals=answers))

    # -- inspection ----------------------------------------------------------------------------
    def inspect_branches(self) -> list[BranchStatus]:
        return [rt.status() for rt in self._branches.values()]

    async def wait(
        self, timeout: float | None = None, branch_ids: Sequence[str] | None = None
    ) -> list[BranchStatus]:
        """Wait until the branches (all, or ``branch_ids``) are no longer running, or ``timeout``.

        Waits on the branch tasks themselves (no polling); returns the statuses either way.
        """
        selected = (
            [self.get_branch(k) for k in branch_ids]
            if branch_ids
            else list(self._branches.values())
        )
        me = asyncio.current_task()
        tasks = [
            rt.task
            for rt in selected
            if rt.task is not None and not rt.task.done() and rt.task is not me
        ]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        return self.inspect_branches()

    wait_branches = wait

    def fork_cost(self) -> ForkCostSummary:
        handle = self._require_handle()
        costs = [
            BranchCost(
                branch_id=rt.branch_id,
                label=rt.label,
                model=rt.spec.model,
                cumulative_usd=rt.meter.cumulative_usd,
                budget_usd=rt.spec.budget_usd,
                requests=rt.meter.requests,
                input_tokens=rt.meter.input_tokens,
                output_tokens=rt.meter.output_tokens,
                tokens_estimated=history_estimated(rt.history),
                budget_rule=budget_rule_text(rt, self.default_model),
            )
            for rt in self._branches.values()
        ]
        known = [c.cumulative_usd for c in costs if c.cumulative_usd is not None]
        return ForkCostSummary(
            fork_id=handle.fork_id,
            branches=costs,
            aggregate_usd=sum(known) if known else None,
            aggregate_budget_usd=handle.aggregate_budget_usd,
        )

    def file_changes(self, key: str) -> list[FileChange]:
        """What a branch changed so far (tool writes and shell commands alike)."""
        rt = self.get_branch(key)
        if rt.ws_branch is None:
            return []
        changes = rt.ws_branch.changes()
        now = time.time()
        out = [
            FileChange(p, "write", now, rt.branch_id)
            for p in sorted({*changes.created, *changes.modified})
        ]
        out += [FileChange(p, "delete", now, rt.branch_id) for p in changes.deleted]
        return out

    def diff(self, paths: list[str] | None = None) -> dict[str, Any]:
        """A small cross-branch diff report (see ``branching_core.fork.diffs``)."""
        handle = self._require_handle()
        rows = [
            (rt.branch_id, rt.label, Path(rt.ws_branch.path), rt.ws_branch.changes())
            for rt in self._branches.values()
            if rt.ws_branch is not None
        ]
        return diff_report(handle.fork_id, self.parent_path, rows, paths=paths)

    # -- nesting -----------------------------------------------------------------------------
    def nested(self, key: str | BranchRuntime) -> ForkCoordinator:
        """The coordinator for forks started from inside a branch (created on first use)."""
        rt = key if isinstance(key, BranchRuntime) else self.get_branch(key)
        if rt.child is None:
            rt.child = ForkCoordinator(
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

    # -- merge ---------------------------------------------------------------------------------
    async def merge_or_select(self, action: str, **judge_options: Any) -> MergeResult:
        """``"pick:<label or id>"`` merges that branch; ``"abort"`` discards them all;
        ``"auto"`` lets the judge pick and merges its pick (``judge_options`` go to
        :meth:`resolve`, e.g. ``judges=[...]``, ``test_command=...``); a judge that cannot
        name a branch raises ``RuntimeError`` and nothing is merged.

        The winner (awaited if still running) is committed into the parent: conflicting paths
        (changed in the parent since the fork) are reported and left alone, the rest applied.
        Losers are cancelled and their workspace branches aborted. A budget-stopped or
        terminated winner merges its files and its partial history.
        """
        handle = self._require_handle()
        action = action.strip()
        if action == "abort":
            ids = await self.abort_fork()
            return MergeResult(
                fork_id=handle.fork_id,
                action="abort",
                discarded_branch_ids=ids,
                pre_fork_checkpoint_id=handle.parent_checkpoint_id,
            )
        if action == "auto":
            outcome = await self.resolve(
                replace(handle.merge_strategy, kind="auto"), **judge_options
            )
            if outcome.committed and outcome.merge_result is not None:
                return outcome.merge_result
            raise RuntimeError(
                f"the judge did not pick a branch ({outcome.fallback_reason or 'no verdict'}): "
                "use 'pick:<label>' or 'abort'"
            )
        if action == "combine":  # per path / per hunk from several branches (fork.combine)
            from branching_core.fork.combine import merge_combined

            return await merge_combined(self, **judge_options)
        if not action.startswith("pick:"):
            raise ValueError(
                f"unknown action {action!r}: use 'pick:<label or id>', 'combine', 'auto' or 'abort'"
            )
        async with self._lock:
            if self._resolved:
                raise RuntimeError(
                    f"fork {handle.fork_id} is already resolved ({self._resolution})"
                )
            winner = self.get_branch(action[5:].strip())
            if winner.ws_branch is None:
                raise RuntimeError(f"branch {winner.label} has no workspace branch left to merge")
            if winner.task is not None and not winner.task.done():
                if winner.task is asyncio.current_task():
                    raise RuntimeError("a branch cannot merge itself")
                await asyncio.wait([winner.task])
            if winner.child is not None and not winner.child.is_resolved:
                await winner.child.abort_fork()
            discarded = []
            for rt in self._branches.values():
                if rt is not winner:
                    await self._discard(rt)
                    discarded.append(rt.branch_id)
            report = await self._apply(winner)
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
            self._apply_paths(branch_dir, parent_dir, changes, set(conflicts), is_dir, report)
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
                    self._apply_paths(
                        branch_dir, parent_dir, changes, set(exc.paths), is_dir, report
                    )
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

    @staticmethod
    def _apply_paths(
        src_root: Path,
        dst_root: Path,
        changes: Any,
        conflicts: set[str],
        is_dir: set[str],
        report: FlushReport,
    ) -> None:
        done = apply_paths(src_root, dst_root, changes, skip=conflicts, is_dir=is_dir)
        report.applied_paths.extend(done.applied)
        report.deleted_paths.extend(done.deleted)
        report.errors.extend(FlushError(rel, msg) for rel, msg in done.errors)

    # -- persistence ---------------------------------------------------------------------------
    def _manifest(self) -> dict[str, Any]:
        handle = self._require_handle()
        return {
            "fork_id": handle.fork_id,
            "created_at": handle.created_at,
            "depth": handle.depth,
            "parent_workspace_branch_id": self._parent_ws_id(),
            "parent_branch_id": handle.parent_branch_id,
            "parent_fork_id": self.parent_coordinator.fork_id if self.parent_coordinator else None,
            "resolved": self._resolved,
            "resolution": self._resolution,
            "resolved_at": self._resolved_at,
            "aggregate_budget_usd": handle.aggregate_budget_usd,
            "isolation": asdict(handle.isolation),
            "strategy": asdict(handle.merge_strategy),
            "max_branches": self.max_branches,
            "max_depth": self.max_depth,
            "pre_fork_checkpoint_id": handle.parent_checkpoint_id,
            "post_fork_checkpoint_id": self._post_checkpoint,
            "pid": os.getpid(),
            "branches": [
                {
                    "branch_id": rt.branch_id,
                    "label": rt.label,
                    "index": rt.index,
                    "spec": rt.spec.to_json(),
                    "state": rt.state,
                    "resolution": rt.resolution,
                    "workspace_branch_id": rt.workspace_branch_id,
                    "error": rt.error,
                    "output": rt.output,
                    "meter": rt.meter.to_json(),
                    "tool_calls": rt.tool_calls,
                    "turns": rt.turns,
                    "started_at": rt.started_at,
                    "finished_at": rt.finished_at,
                    "history": f"history/{rt.branch_id}.json",
                }
                for rt in self._branches.values()
            ],
        }

    def _persist(self, *, durable: bool = False, now: bool = False) -> None:
        """Save the manifest: at once (``now``/``durable``) or through the background writer."""
        if self._handle is None:
            return
        if now or durable:
            self._writer.pending.pop((self._handle.fork_id, "manifest"), None)
            self.store.write_manifest(self._manifest(), durable=durable)
        else:
            self._writer.submit(self._handle.fork_id, "manifest", self._manifest())

    def _prune_later(self) -> None:
        """Apply the retention policy (fork/retention.py) in a worker thread, after the
        checkpoint recording under way (``flush()`` waits for it)."""
        keep = self.options.keep_resolved
        pending = list(self._background)

        async def prune() -> None:
            if pending:
                await asyncio.wait(pending)
            await asyncio.to_thread(prune_resolved, self.store, keep)

        task = asyncio.get_running_loop().create_task(prune())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _persist_durable(self) -> None:
        """Save the manifest with fsync, in a worker thread (an fsync can take a while)."""
        if self._handle is not None:
            self._writer.pending.pop((self._handle.fork_id, "manifest"), None)
            await asyncio.to_thread(self.store.write_manifest, self._manifest(), durable=True)

    def _save_history(self, rt: BranchRuntime) -> None:
        """Queue ``rt``'s history for the writer; a failure is reported, never raised (a
        history that cannot be saved must not end the branch or skip its manifest)."""
        if self._handle is None:
            return
        try:
            payload = dumps_history(rt.history)
        except Exception as exc:
            self._save_failed(self._handle.fork_id, rt.branch_id, exc)
            return
        self._writer.submit(self._handle.fork_id, rt.branch_id, payload)

    def _persist_or_report(self, rt: BranchRuntime | None = None) -> None:
        """:meth:`_persist`, reporting a failure instead of raising it."""
        try:
            self._persist()
        except Exception as exc:
            self._save_failed(self.fork_id or "", "manifest", exc, rt)

    def _save_failed(
        self, fork_id: str, name: str, exc: BaseException, rt: BranchRuntime | None = None
    ) -> None:
        """Log a failed save and show it: on its branch (``save_error``, a history) or on
        ``rt``/every branch (the manifest), and in :attr:`save_errors`."""
        what = "the fork manifest" if name == "manifest" else f"the history of {name}"
        message = f"cannot save {what} of fork {fork_id}: {type(exc).__name__}: {exc}"
        log.error("%s", message)
        self.save_errors.append(message)
        if name != "manifest":
            targets = [r for r in self._branches.values() if r.branch_id == name]
        else:
            targets = [rt] if rt is not None else list(self._branches.values())
        for target in targets:
            target.save_error = message

    async def rewind_to_checkpoint(self, checkpoint_id: str) -> list[ModelMessage]:
        """Restore ``fork:<id>`` / ``post-fork:<id>`` (files + history) into the parent."""
        await self.flush()
        return await asyncio.to_thread(self.checkpoints.rewind, checkpoint_id, self.parent_path)

    async def flush(self) -> None:
        """Wait until every state change (and post-fork checkpoint) so far is on disk."""
        await self._writer.flush()
        while self._background:
            await asyncio.wait(list(self._background))

    # -- recovery ------------------------------------------------------------------------------
    @classmethod
    def recover(
        cls,
        workspace: Workspace | str | os.PathLike[str],
        agent: Any = None,
        *,
        options: ForkOptions | None = None,
        **option_overrides: Any,
    ) -> list[ForkCoordinator]:
        """Rebuild a coordinator for every fork left open under ``workspace`` (e.g. after a crash).

        Branches that were running when their process died become ``terminated`` (their
        error says why); every branch keeps its partial history and its durable workspace
        branch, so the fork can be inspected, continued (:meth:`run_on_branch`), merged or
        aborted. Outer forks are recovered before the forks nested in their branches.
        ``options`` (and keyword overrides of its fields) apply to every recovered fork;
        each keeps the branch and depth limits its manifest recorded.
        """
        base = ForkOptions.build(options, **option_overrides)
        ws = _as_workspace(workspace)
        store = ForkStore(ws.path)
        sweep_interrupted_forks(ws, store)
        prune_resolved(store, base.keep_resolved)
        by_branch: dict[str, tuple[ForkCoordinator, BranchRuntime]] = {}
        out: list[ForkCoordinator] = []
        for manifest in store.list_open():
            try:
                parent_ws_id = manifest.get("parent_workspace_branch_id")
                parent_node = ws if not parent_ws_id else ws.open_branch(parent_ws_id)
                owner = by_branch.get(manifest.get("parent_branch_id") or "")
                coord = cls(
                    agent,
                    workspace=ws,
                    parent_node=parent_node,
                    depth=int(manifest.get("depth", 1)) - 1,
                    store=store,
                    parent_runtime=owner[1] if owner else None,
                    parent_coordinator=owner[0] if owner else None,
                    options=replace(
                        base,
                        max_branches=int(manifest.get("max_branches", base.max_branches)),
                        max_depth=int(manifest.get("max_depth", base.max_depth)),
                    ),
                )
                coord._restore(manifest)
            except Exception as exc:  # one broken fork must not hide the others
                log.warning("cannot recover fork %s: %s", manifest.get("fork_id"), exc)
                continue
            if owner is not None:
                owner[1].child = coord
            for rt in coord._branches.values():
                by_branch[rt.branch_id] = (coord, rt)
            out.append(coord)
        if base.materialize:  # rebuild or clean mirrors a killed process left
            from branching_core.review.mirror_recovery import recover_mirrors

            recover_mirrors(ws, out, keep_artifacts=base.keep_artifacts)
        return out

    def _restore(self, manifest: dict[str, Any]) -> None:
        fork_id = manifest["fork_id"]
        parent_json = self.store.read_history(fork_id, "parent")
        seed = load_history(parent_json) if parent_json else []
        runtimes = []
        for data in manifest["branches"]:
            spec = BranchSpec.from_json(data["spec"])
            state = data["state"]
            error = data.get("error")
            if state == "running":
                state, error = "terminated", INTERRUPTED
            ws_branch = None
            if data.get("resolution") is None and data.get("workspace_branch_id"):
                try:
                    ws_branch = self.workspace.open_branch(data["workspace_branch_id"])
                except Exception as exc:
                    self.recovery_errors.append(f"{data['label']}: workspace branch lost ({exc})")
            raw = self.store.read_history(fork_id, data["branch_id"])
            rt = BranchRuntime(
                branch_id=data["branch_id"],
                label=data["label"],
                spec=spec,
                index=int(data.get("index", len(runtimes))),
                depth=int(manifest.get("depth", 1)),
                ws_branch=ws_branch,
                workspace_branch_id=data.get("workspace_branch_id"),
                path=Path(ws_branch.path) if ws_branch is not None else None,
                state=state,
                resolution=data.get("resolution"),
                history=load_history(raw) if raw else list(seed),
                seed_history=seed,
                meter=BranchMeter.from_json(data.get("meter")),
                error=error,
                output=data.get("output"),
                started_at=data.get("started_at"),
                finished_at=data.get("finished_at"),
                tool_calls=int(data.get("tool_calls", 0)),
                turns=int(data.get("turns", 1)),
            )
            runtimes.append(rt)
        self._branches = {rt.branch_id: rt for rt in runtimes}
        self._handle = ForkHandle(
            fork_id=fork_id,
            branches=[rt.branch_id for rt in runtimes],
            labels={rt.branch_id: rt.label for rt in runtimes},
            depth=int(manifest.get("depth", 1)),
            parent_checkpoint_id=manifest.get("pre_fork_checkpoint_id"),
            merge_strategy=MergeStrategy(**manifest.get("strategy", {})),
            isolation=BranchIsolation(**manifest.get("isolation", {})),
            aggregate_budget_usd=manifest.get("aggregate_budget_usd"),
            parent_branch_id=manifest.get("parent_branch_id"),
            created_at=float(manifest.get("created_at", 0.0)),
        )
        self._resolved = bool(manifest.get("resolved"))
        self._resolution = manifest.get("resolution")
        self._resolved_at = manifest.get("resolved_at")
        self._persist(durable=True)

    # -- review (branching_core.review; imported lazily) ----------------------------------
    def diff_report(self, paths: list[str] | None = None) -> Any:
        """The typed cross-branch ``BranchDiffReport`` (see ``review.build_diff_report``)."""
        from branching_core.review.diff_report import build_diff_report

        handle = self._require_handle()
        runtimes = list(self._branches.values())
        return build_diff_report(handle.fork_id, runtimes, paths, parent_path=self.parent_path)

    async def resolve(self, strategy: MergeStrategy | None = None, **kwargs: Any) -> Any:
        """Settle the fork with a judge per ``strategy`` (see ``review.resolver.resolve``)."""
        from branching_core.review.resolver import resolve

        return await resolve(self, strategy, **kwargs)

    def process_report(self) -> Any:
        """Each branch's tool calls, aligned, with where they diverged (``fork.process_report``)."""
        from branching_core.fork.process_report import build_process_report

        return build_process_report(self._branches.values(), price_fn=self.price_fn)

    def combine_preview(self, selection: Any, *, base: str | None = None) -> Any:
        """Plan ``merge_or_select("combine", selection=...)`` without writing anything."""
        from branching_core.fork.combine import plan_combination

        return plan_combination(self, selection, base=base)

    def estimate(
        self, specs: Sequence[BranchSpec | dict[str, Any]], parent_history: Sequence[Any], **kw: Any
    ) -> Any:
        """Estimated cost of forking ``specs`` now (``fork.estimate.estimate_fork``)."""
        from branching_core.fork.estimate import estimate_fork

        model = self.default_model or getattr(self.agent, "model", None)
        return estimate_fork(
            specs, parent_history, default_model=model, price_fn=self.price_fn, **kw
        )


def list_open_forks(workspace: Workspace | str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The manifests of forks not yet merged or aborted (no coordinator is built).

    Given an open ``Workspace`` (what a starting app has), it first drops what a process
    killed inside ``fork()`` left (fork/sweep.py): never anything of a live process."""
    if isinstance(workspace, Workspace):
        store = ForkStore(workspace.path)
        try:
            sweep_interrupted_forks(workspace, store)
        except Exception as exc:  # listing must work even when sweeping cannot
            log.warning("cannot sweep interrupted forks: %s", exc)
        return store.list_open()
    return ForkStore(Path(workspace)).list_open()


def states_final(statuses: Sequence[BranchStatus]) -> bool:
    """True when no branch is running (paused-for-approval branches count as settled)."""
    return all(s.state in SETTLED_STATES for s in statuses)


__all__ = [
    "INTERRUPTED",
    "BranchRunContext",
    "BranchRuntime",
    "ForkCoordinator",
    "current_branch",
    "list_open_forks",
    "states_final",
]
