"""``SubAgentBranches``: sub-agent definitions registered on a parent agent.

::

    subagents = SubAgentBranches(definitions=[FACT_CHECK], workspace="path/to/project")
    agent = Agent(model, capabilities=[subagents])      # or toolsets=[subagents.as_toolset()]

The parent gets the generated ``branch`` tool. Each call runs one sub-agent (see
``runner``); several calls in one model response run concurrently (pydantic-ai runs the
tool calls of one response in parallel, and ``branch`` is not a sequential tool). A failure
comes back to the parent's model as a failed tool result; the programmatic
:meth:`SubAgentBranches.branch` raises ``BranchExecutionError`` (a ``BranchError``) with the
cause chained instead. Every run is kept in :attr:`SubAgentBranches.runs`, nested runs under
their parent run's ``children``; ``add_listener`` follows them live.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_ai import ToolFailed
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import RunContext

from branching_core.errors import BranchExecutionError, InvalidArgumentError, InvalidTypeError
from branching_core.live.subagents.definition import (
    MERGE_MODES,
    MergeMode,
    SubAgent,
    check_unique_names,
)
from branching_core.live.subagents.history import branch_result_message, branch_result_text
from branching_core.live.subagents.render import discovery_xml
from branching_core.live.subagents.runner import (
    Parent,
    SubAgentRunner,
    SubAgentSettings,
    new_run_id,
)
from branching_core.live.subagents.tools import (
    BranchToolset,
    split_arguments,
    validation_message,
)
from branching_core.live.subagents.transcript import (
    Listener,
    SubAgentFinished,
    SubAgentRun,
    SubAgentStarted,
)

_CURRENT: contextvars.ContextVar[SubAgentBranches | None] = contextvars.ContextVar(
    "forkdeck_subagents", default=None
)
FAILED_PREFIX = "Branch execution failed: "


def current_registry() -> SubAgentBranches | None:
    """The registry of the run the calling code is in (``None`` outside one)."""
    return _CURRENT.get()


@dataclass
class SubAgentBranches(AbstractCapability[Any]):
    """Sub-agent definitions of one parent, and the runs they produced.

    ``workspace`` is where sub-agents get their copy-on-write branches: a directory, a
    ``Workspace``, a ``Branch`` (the parent itself runs in a branch), a callable
    ``f(run_context) -> Workspace | Branch | None`` (chosen per call, e.g. the branch a fork
    coordinator gave the parent), or ``None`` (no file tools, no isolation needed).
    ``command_runner`` runs the sub-agents' ``run_command`` (default: the sandbox),
    ``price_fn(response)`` prices responses for budgets (default: genai-prices),
    ``model_resolver(name)`` turns model strings into models (default ``resolve_model``),
    ``max_depth`` bounds nesting, ``transcript_dir`` (optional) receives one JSON record
    per finished run.
    """

    definitions: Sequence[SubAgent] = ()
    workspace: Any = None
    command_runner: Any = None
    command_timeout: float = 60.0
    price_fn: Any = None
    model_resolver: Any = None
    max_depth: int = 3
    transcript_dir: Path | str | None = None
    toolset_id: str = "subagent-branches"

    runs: list[SubAgentRun] = field(default_factory=list, repr=False, compare=False)
    """Top-level runs, oldest first (nested runs are in each run's ``children``)."""
    _settings: SubAgentSettings | None = field(default=None, repr=False, compare=False)
    _owner: SubAgentRun | None = field(default=None, repr=False, compare=False)
    _ws: Any = field(default=None, repr=False, compare=False)
    _toolset: BranchToolset | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.definitions = list(self.definitions)
        check_unique_names(self.definitions)
        if self._settings is None:
            self._settings = SubAgentSettings(
                command_runner=self.command_runner,
                command_timeout=self.command_timeout,
                price_fn=self.price_fn,
                model_resolver=self.model_resolver,
                max_depth=self.max_depth,
                transcript_dir=Path(self.transcript_dir) if self.transcript_dir else None,
            )

    # -- registration --------------------------------------------------------------------------
    @property
    def settings(self) -> SubAgentSettings:
        assert self._settings is not None
        return self._settings

    def register(self, definition: SubAgent) -> SubAgent:
        """Add a definition (its name must be new here)."""
        check_unique_names([*self.definitions, definition])
        self.definitions = [*self.definitions, definition]
        return definition

    def get(self, name: str) -> SubAgent | None:
        return next((d for d in self.definitions if d.name == name), None)

    def add_listener(self, callback: Listener) -> Callable[[], None]:
        """Follow every run of this registry and of the nested ones under it."""
        return self.settings.hub.add_listener(callback)

    def iter_runs(self) -> Iterator[SubAgentRun]:
        """Every run, nested ones included, depth first."""
        for run in list(self.runs):
            yield from run.walk()

    def find_run(self, key: str) -> SubAgentRun | None:
        """A run by ``run_id`` or by the parent's ``tool_call_id``."""
        return next((r for r in self.iter_runs() if key in (r.run_id, r.tool_call_id)), None)

    def cancel(self, key: str, reason: str = "cancelled by the user") -> bool:
        """Cancel a running sub-agent by ``run_id`` or tool call id (False if not running)."""
        run = self.find_run(key)
        return run is not None and run.cancel(reason)

    # -- pydantic-ai wiring --------------------------------------------------------------------
    def as_toolset(self) -> BranchToolset:
        """The ``branch`` tool as a toolset (``Agent(toolsets=[...])``)."""
        if self._toolset is None:
            self._toolset = BranchToolset(
                lambda: list(self.definitions), self._branch_tool, id=self.toolset_id
            )
        return self._toolset

    def get_toolset(self) -> Any:
        return self.as_toolset()

    async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
        token = _CURRENT.set(self)
        try:
            return await handler()
        finally:
            _CURRENT.reset(token)

    # -- the workspace node sub-agents branch from ---------------------------------------------
    def _node(self, ctx: RunContext[Any] | None) -> Any:
        from branching_core.workspace import Workspace

        target = self.workspace
        if callable(target) and not isinstance(target, Workspace) and not hasattr(target, "branch"):
            return target(ctx)
        if target is None or hasattr(target, "branch"):
            return target
        if self._ws is None:
            if not isinstance(target, (str, os.PathLike)):
                raise InvalidTypeError(
                    f"workspace must be a path, Workspace or Branch, not {target!r}"
                )
            self._ws = Workspace(target)
        return self._ws

    def _child(self, definition: SubAgent, run: SubAgentRun, node: Any) -> SubAgentBranches:
        """The registry a sub-agent with ``branches`` uses (bound to its own branch)."""
        return SubAgentBranches(
            definitions=definition.branches,
            workspace=node,
            toolset_id=f"{self.toolset_id}/{definition.name}",
            _settings=self.settings,
            _owner=run,
        )

    # -- running -------------------------------------------------------------------------------
    def _validate_input(self, definition: SubAgent, kwargs: dict[str, Any]) -> BaseModel | None:
        if definition.initial_input is None:
            if kwargs:
                raise InvalidArgumentError(
                    f"{definition.name} takes no input, but got {', '.join(sorted(kwargs))}"
                )
            return None
        return definition.initial_input.model_validate(kwargs)

    def _merge_mode(self, definition: SubAgent, merge: Any) -> MergeMode:
        if merge not in MERGE_MODES:
            raise InvalidArgumentError(
                f"merge must be one of {', '.join(MERGE_MODES)}, not {merge!r}"
            )
        return "summarize" if definition.final_output is None else merge

    async def run(
        self,
        definition: SubAgent,
        *,
        arguments: BaseModel | None,
        merge: MergeMode,
        parent: Parent,
        tool_call_id: str | None = None,
    ) -> SubAgentRun:
        """Run ``definition`` to a final state and return its record (never raises for it).

        Cancelling the caller cancels the sub-agent (its branch is aborted) and re-raises.
        """
        depth = (self._owner.depth + 1) if self._owner is not None else 1
        run = SubAgentRun(
            run_id=new_run_id(),
            name=definition.name,
            arguments=arguments.model_dump(mode="json") if arguments is not None else {},
            merge=merge,
            depth=depth,
            parent_run_id=self._owner.run_id if self._owner is not None else None,
            tool_call_id=tool_call_id,
        )
        (self._owner.children if self._owner is not None else self.runs).append(run)
        if depth > self.settings.max_depth:
            run.state = "failed"
            limit = self.settings.max_depth
            run.error = f"{definition.name} would nest {depth} levels deep (max_depth is {limit})"
            run.finished_at = run.started_at
            self.settings.hub.publish(SubAgentStarted(run))
            self.settings.hub.publish(SubAgentFinished(run))
            return run
        runner = SubAgentRunner(
            definition,
            run,
            arguments=arguments,
            parent=parent,
            settings=self.settings,
            child_registry=self._child,
        )
        self.settings.hub.publish(SubAgentStarted(run))
        task = asyncio.create_task(
            self._in_context(runner), name=f"subagent-{definition.name}-{run.run_id}"
        )
        run._task = task
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            run.cancel("the parent was cancelled")
            await asyncio.wait({task})
            raise
        return task.result()

    async def _in_context(self, runner: SubAgentRunner) -> SubAgentRun:
        token = _CURRENT.set(None)  # a sub-agent's programmatic branch() needs its own registry
        try:
            return await runner.execute()
        finally:
            _CURRENT.reset(token)

    def _parent_from_ctx(self, ctx: RunContext[Any]) -> Parent:
        return Parent(
            messages=list(ctx.messages),
            run_ctx=ctx,
            node=self._node(ctx),
            deps=ctx.deps,
            model=ctx.model,
            run=self._owner,
        )

    # -- the declarative branch tool -----------------------------------------------------------
    async def _branch_tool(self, ctx: RunContext[Any], args: dict[str, Any]) -> str:
        """``branch()``: discovery without a name, else run one sub-agent (errors as results)."""
        name = args.get("name")
        if name in (None, "") and not any(k for k in args if k not in ("name", "merge")):
            return discovery_xml(self.definitions)
        if not isinstance(name, str) or name == "":
            raise ToolFailed("branch: give name=<sub-agent>; call branch() to list them")
        definition = self.get(name)
        if definition is None:
            known = ", ".join(d.name for d in self.definitions) or "none"
            raise ToolFailed(f"branch: no sub-agent named {name!r} (registered: {known})")
        control, kwargs = split_arguments(args, {"name", "merge"}, definition.initial_input)
        try:
            merge = self._merge_mode(definition, control.get("merge", "end_result"))
            arguments = self._validate_input(definition, kwargs)
        except ValidationError as exc:
            raise ToolFailed(
                f"branch: invalid input for {name}: {validation_message(exc)}"
            ) from None
        except ValueError as exc:
            raise ToolFailed(f"branch: {exc}") from None
        run = await self.run(
            definition,
            arguments=arguments,
            merge=merge,
            parent=self._parent_from_ctx(ctx),
            tool_call_id=ctx.tool_call_id,
        )
        if run.state != "done":
            run.result_text = FAILED_PREFIX + (run.error or run.state)
            raise ToolFailed(run.result_text)
        return run.result_text or ""

    # -- programmatic branching ----------------------------------------------------------------
    async def branch(
        self,
        definition: SubAgent,
        parent: RunContext[Any] | list[ModelMessage],
        /,
        merge: MergeMode = "end_result",
        **kwargs: Any,
    ) -> BaseModel | None:
        """Run ``definition`` now and return its ``final_output`` (``None`` without one).

        ``parent`` is the parent's ``RunContext`` (from a tool or a capability hook: the
        ``[Branch Result]`` message is enqueued into that run) or a message list (the
        conversation to inherit; the message is appended to it). ``kwargs`` are the
        ``initial_input`` fields. The definition need not be registered. Any failure
        raises :class:`~branching_core.errors.BranchExecutionError` with the cause chained
        and the run record on ``.run``.
        """
        if not isinstance(definition, SubAgent):
            raise InvalidTypeError(f"branch() needs a SubAgent definition, not {definition!r}")
        try:
            mode = self._merge_mode(definition, merge)
            arguments = self._validate_input(definition, kwargs)
        except (ValidationError, ValueError) as exc:
            detail = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
            raise BranchExecutionError(
                f"invalid input for {definition.name}: {detail}", name=definition.name
            ) from exc
        if isinstance(parent, list):
            spawn = Parent(messages=list(parent), node=self._node(None), run=self._owner)
        else:
            spawn = self._parent_from_ctx(parent)
        run = await self.run(definition, arguments=arguments, merge=mode, parent=spawn)
        if run.state != "done":
            error = BranchExecutionError(
                FAILED_PREFIX + (run.error or run.state), name=definition.name, run=run
            )
            raise error from run.exception
        text = branch_result_text(definition.name, run.result_text or "")
        if isinstance(parent, list):
            parent.append(branch_result_message(definition.name, run.result_text or ""))
        else:
            parent.enqueue(text)
        return run.output if isinstance(run.output, BaseModel) else None


async def branch(
    definition: SubAgent,
    parent: RunContext[Any] | list[ModelMessage],
    /,
    merge: MergeMode = "end_result",
    **kwargs: Any,
) -> BaseModel | None:
    """Programmatic branching (seed 002's ``self.branch``) with the run's own registry.

    Inside a run whose agent has a :class:`SubAgentBranches` capability, that registry (its
    workspace, runner, budgets and ``runs``) is used; elsewhere a registry without a
    workspace. See :meth:`SubAgentBranches.branch`.
    """
    registry = current_registry() or SubAgentBranches()
    return await registry.branch(definition, parent, merge, **kwargs)


__all__ = ["FAILED_PREFIX", "SubAgentBranches", "branch", "current_registry"]
