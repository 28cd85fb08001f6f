"""Running one sub-agent: its branch, its agent, its limits, and what is left afterwards.

A sub-agent runs as its own asyncio task (so it can be cancelled on its own) with:

* a copy of the parent's conversation (unanswered tool calls and the parent's system prompt
  removed) plus one user message carrying its typed input;
* its own copy-on-write workspace branch (nested under the parent's branch when the parent
  is itself a sub-agent), its file and shell tools bound to that branch; the branch is
  landed in the parent's view only when the sub-agent succeeds, aborted otherwise;
* ``max_steps`` as pydantic-ai's ``request_limit``, ``timeout_s`` as ``asyncio.timeout``
  (the run is cancelled, not just no longer awaited), ``budget_usd`` checked after every
  priced model response, before that response's tools run.

Every outcome ends in a :class:`SubAgentRun` with a final state and, for a failure, the
exception that caused it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, ToolOutput
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.usage import UsageLimits

from branching_core.agent.model_label import model_label
from branching_core.agent.pricing import PriceFn, UsageMeter, default_price
from branching_core.agent.stream import ToolReturned, translate
from branching_core.atomicio import atomic_write
from branching_core.errors import BranchingError, InvalidArgumentError, error_name
from branching_core.live.subagents.definition import SubAgent
from branching_core.live.subagents.history import inherited_history, input_prompt
from branching_core.live.subagents.merge import abort_quietly, land
from branching_core.live.subagents.render import branch_result_xml, summary_text
from branching_core.live.subagents.tools import FINISH_TOOL, ParentToolset
from branching_core.live.subagents.transcript import (
    EventHub,
    SubAgentEvent,
    SubAgentFinished,
    SubAgentProgress,
    SubAgentRun,
    SubAgentToolResult,
    render_transcript,
)

SUMMARY_INSTRUCTIONS = (
    "You summarise the work of a sub-agent for the agent that delegated it. In a few "
    "sentences say what it did (tools used, what it found or changed) and how it reached "
    "its result. Plain prose, no preamble."
)


class BudgetExhausted(BranchingError):
    """A sub-agent's priced cost crossed its ``budget_usd``."""


class BudgetUnknown(BranchingError):
    """A sub-agent with a ``budget_usd`` got a response nobody could price."""


class SubAgentConflict(BranchingError):
    """A sub-agent's file changes collide with changes made in its parent meanwhile."""


@dataclass
class SubAgentSettings:
    """What a registry hands down to every sub-agent (and nested registry) it starts."""

    command_runner: Any = None
    command_timeout: float = 60.0
    price_fn: PriceFn | None = None
    model_resolver: Callable[[str], Any] | None = None
    max_depth: int = 3
    transcript_dir: Path | None = None
    hub: EventHub[SubAgentEvent] = field(default_factory=lambda: EventHub("sub-agent event"))

    def resolve(self, model: Any) -> Any:
        if model is None or not isinstance(model, str):
            return model
        if self.model_resolver is not None:
            return self.model_resolver(model)
        from branching_core.agent.models import resolve_model

        return resolve_model(model)


@dataclass
class Parent:
    """Everything about the spawning side a sub-agent needs."""

    messages: list[ModelMessage]
    run_ctx: Any = None
    """The parent's ``RunContext`` (``None`` when spawned from a bare message list)."""
    node: Any = None
    """The parent's workspace node (``Workspace`` or ``Branch``), ``None`` for no files."""
    deps: Any = None
    model: Any = None
    run: SubAgentRun | None = None
    """The parent sub-agent's run (``None`` for the root agent)."""


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def _instructions(definition: SubAgent) -> str:
    base = definition.system_prompt or (
        f"You are {definition.name}, a focused sub-agent: {definition.display_description}"
    )
    if definition.final_output is not None:
        return (
            f"{base}\n\nWhen your job is done, call `{FINISH_TOOL}` with your final output; "
            "that ends your work and returns the result to the agent that spawned you."
        )
    return f"{base}\n\nWhen your job is done, answer with your final result as text."


def _own_tool_names(definition: SubAgent, workspace_toolset: Any) -> set[str]:
    names: set[str] = set()
    for tool in definition.tools:
        name = getattr(tool, "name", None) or getattr(tool, "__name__", None)
        if isinstance(name, str):
            names.add(name)
    if workspace_toolset is not None:
        names.update(workspace_toolset.tools)
    return names


class SubAgentRunner:
    """Runs one sub-agent to a final state, filling its :class:`SubAgentRun` as it goes."""

    def __init__(
        self,
        definition: SubAgent,
        run: SubAgentRun,
        *,
        arguments: BaseModel | None,
        parent: Parent,
        settings: SubAgentSettings,
        child_registry: Callable[[SubAgent, SubAgentRun, Any], Any] | None = None,
    ) -> None:
        self.definition = definition
        self.run = run
        self.arguments = arguments
        self.parent = parent
        self.settings = settings
        self.child_registry = child_registry
        self.branch: Any = None
        self.meter = UsageMeter()
        """The one usage meter (shared with fork branches); mirrored into ``run.cost_*``."""
        self._seen = 0
        self._history_len = 0

    # -- the whole lifecycle -------------------------------------------------------------------
    async def execute(self) -> SubAgentRun:
        run, definition = self.run, self.definition
        try:
            try:
                model = self.settings.resolve(definition.model) or self.parent.model
                if model is None:
                    raise InvalidArgumentError(
                        f"{definition.name} has no model and its parent gave none to inherit"
                    )
                run.model_name = model_label(model)
                if self.parent.node is not None and definition.workspace_tools:
                    self.branch = await asyncio.to_thread(
                        self.parent.node.branch, f"subagent-{definition.name}-{run.run_id}"
                    )
                    run.workspace_branch = self.branch.branch_path
                    run.workspace_path = str(self.branch.path)
                async with asyncio.timeout(definition.timeout_s):
                    output = await self._run_agent(model)
            except TimeoutError as exc:
                self._fail(
                    "timed_out",
                    f"{definition.name} timed out after {definition.timeout_s:g}s and was "
                    "cancelled",
                    exc,
                )
            except asyncio.CancelledError as exc:
                reason = run._cancel_reason or "the run was cancelled"
                self._fail("terminated", f"{definition.name} was cancelled ({reason})", exc)
            except BudgetExhausted as exc:
                self._fail("budget_exhausted", str(exc), exc)
            except BudgetUnknown as exc:
                self._fail("budget_unknown", str(exc), exc)
            except UsageLimitExceeded as exc:
                self._fail(
                    "step_limit",
                    f"{definition.name} used its {definition.max_steps} steps without finishing",
                    exc,
                )
            except Exception as exc:
                self._fail("failed", f"{definition.name} failed: {error_name(exc)}: {exc}", exc)
            else:
                await self._succeed(output, model)
        finally:
            await self._record_discarded()
            await abort_quietly(self.branch)
            if run.state == "running":  # cancelled while landing or summarising
                run.state = "terminated"
                run.error = run.error or f"{definition.name} was cancelled"
            if run.state != "done" and self.branch is not None:
                run.error = f"{run.error}; its file changes were discarded"
            run.finished_at = time.time()
            self._persist()
            self.settings.hub.publish(SubAgentFinished(run))
        return run

    async def _record_discarded(self) -> None:
        """Note what a failed sub-agent had changed before its branch is thrown away."""
        branch = self.branch
        if branch is None or not branch.is_open or self.run.state == "done":
            return
        with contextlib.suppress(Exception):
            changes = await asyncio.to_thread(branch.changes)
            self.run.created = list(changes.created)
            self.run.modified = list(changes.modified)
            self.run.deleted = list(changes.deleted)

    def _fail(self, state: Any, message: str, exc: BaseException) -> None:
        self.run.state = state
        self.run.error = message
        self.run.exception = exc

    # -- the agent run -------------------------------------------------------------------------
    def _build_agent(self, model: Any) -> Agent[Any, Any]:
        definition = self.definition
        toolsets: list[Any] = []
        workspace_toolset = None
        if self.branch is not None:
            from branching_core.agent.toolset import create_workspace_toolset

            workspace_toolset = create_workspace_toolset(
                self.branch.path,
                command_runner=self.settings.command_runner,
                command_timeout=self.settings.command_timeout,
                on_replace=getattr(self.branch, "note_replacing", None),
            )
            toolsets.append(workspace_toolset)
        toolsets.extend(definition.toolsets)
        if self.parent.run_ctx is not None and getattr(self.parent.run_ctx, "tool_manager", None):
            toolsets.append(
                ParentToolset(
                    self.parent.run_ctx,
                    inherit=definition.inherit_parent_tools,
                    reserved=_own_tool_names(definition, workspace_toolset),
                    allow=definition.parent_tools,
                )
            )
        if definition.branches and self.child_registry is not None:
            child = self.child_registry(definition, self.run, self.branch)
            toolsets.append(child.as_toolset())
        output_type: Any = (
            ToolOutput(
                definition.final_output,
                name=FINISH_TOOL,
                description="Finish your job and hand your final output to the parent agent.",
            )
            if definition.final_output is not None
            else str
        )
        return Agent(
            model,
            instructions=_instructions(definition),
            output_type=output_type,
            tools=list(definition.tools),
            toolsets=toolsets,
            model_settings=definition.model_settings,
            name=definition.name,
        )

    async def _run_agent(self, model: Any) -> Any:
        definition = self.definition
        agent = self._build_agent(model)
        history = inherited_history(self.parent.messages)
        self._history_len = len(history)
        prompt = input_prompt(definition.name, definition.display_description, self.arguments)
        limits = UsageLimits(request_limit=definition.max_steps) if definition.max_steps else None
        arun: Any = None
        try:
            async with agent.iter(
                prompt,
                message_history=history,
                deps=self.parent.deps,
                usage_limits=limits,
            ) as arun:
                async for node in arun:
                    self._capture(arun)
                    if Agent.is_call_tools_node(node):
                        self._account(node.model_response)
                        async with node.stream(arun.ctx) as events:
                            async for event in events:
                                self._on_event(event)
                result = arun.result
            assert result is not None
            return result.output
        finally:
            if arun is not None:
                self._capture(arun)
                self.run.usage = arun.usage

    def _on_event(self, event: object) -> None:
        item = translate(event)
        if not isinstance(item, ToolReturned):
            return
        self.settings.hub.publish(
            SubAgentToolResult(
                self.run,
                tool_name=item.tool_name,
                tool_call_id=item.tool_call_id,
                content=item.content,
                outcome=item.outcome,
            )
        )

    def _capture(self, arun: Any) -> None:
        messages = list(arun.all_messages())[self._history_len :]
        self.run.messages = messages
        if len(messages) > self._seen:
            new = tuple(messages[self._seen :])
            self._seen = len(messages)
            self.settings.hub.publish(SubAgentProgress(self.run, new))

    def _add_to_meter(self, response: ModelResponse) -> str | None:
        """Account one response; returns why it could not be priced (see ``price_response``)."""
        self.meter.add(response, self.settings.price_fn or default_price)
        self.run.cost_usd, self.run.cost_known = self.meter.cost_usd, self.meter.cost_known
        return self.meter.price_error

    def _account(self, response: ModelResponse) -> None:
        error = self._add_to_meter(response)
        budget = self.definition.budget_usd
        if budget is not None and error is not None:
            raise BudgetUnknown(
                f"{self.definition.name} stopped: its cost is unknown, so its budget of "
                f"${budget:g} cannot be checked ({error})"
            )
        if self.meter.over(budget):
            raise BudgetExhausted(
                f"{self.definition.name} exhausted its budget of ${budget:g} "
                f"(spent ${self.run.cost_usd:.6f})"
            )

    # -- success: land the files, then shape the result ----------------------------------------
    async def _succeed(self, output: Any, model: Any) -> None:
        run = self.run
        run.output = output
        if self.branch is not None:
            landing = await land(self.branch)
            run.created, run.modified, run.deleted = (
                landing.created,
                landing.modified,
                landing.deleted,
            )
            if landing.conflicts or landing.errors:
                run.conflicts = landing.conflicts
                detail = (
                    f"paths changed in the parent since it started: {', '.join(landing.conflicts)}"
                    if landing.conflicts
                    else "; ".join(landing.errors)
                )
                exc = SubAgentConflict(detail)
                self._fail(
                    "conflict",
                    f"{self.definition.name} finished but its file changes could not be applied "
                    f"({detail})",
                    exc,
                )
                return
            run.committed = True
            run.landed_by = landing.method
        merge = run.merge
        if merge == "summarize" or not isinstance(output, BaseModel):
            run.summary = await self._summarize(model)
            run.result_text = summary_text(run.summary, output)
        else:
            run.result_text = branch_result_xml(output)
        run.state = "done"

    async def _summarize(self, model: Any) -> str:
        """A second model call: the summary the parent reads (``merge="summarize"``)."""
        summary_model = self.settings.resolve(self.definition.summary_model) or model
        transcript = "\n".join(render_transcript(self.run.messages, max_chars=1500))
        output = self.run.output
        final = (
            json.dumps(output.model_dump(mode="json"), ensure_ascii=False)
            if isinstance(output, BaseModel)
            else str(output)
        )
        summarizer: Agent[Any, str] = Agent(
            summary_model, instructions=SUMMARY_INSTRUCTIONS, name="summarize"
        )
        try:
            result = await summarizer.run(
                f"Sub-agent {self.definition.name} transcript:\n{transcript}\n\n"
                f"Its final result:\n{final}"
            )
        except Exception as exc:  # the work is done and landed; a summary is a nicety
            return f"(no summary: {error_name(exc)}: {exc})"
        for message in result.new_messages():
            if isinstance(message, ModelResponse):
                self._account_summary(message)
        self.run.usage = self.run.usage + result.usage
        return str(result.output)

    def _account_summary(self, response: ModelResponse) -> None:
        self._add_to_meter(response)

    def _persist(self) -> None:
        directory = self.settings.transcript_dir
        if directory is None:
            return
        with contextlib.suppress(OSError, TypeError, ValueError):
            directory.mkdir(parents=True, exist_ok=True)
            payload = json.dumps(self.run.to_json(), indent=1, default=str).encode()
            atomic_write(directory / f"{self.run.run_id}.json", payload)


__all__ = [
    "BudgetExhausted",
    "Parent",
    "SubAgentConflict",
    "SubAgentRunner",
    "SubAgentSettings",
    "model_label",
    "new_run_id",
]
