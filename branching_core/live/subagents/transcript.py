"""What is kept of a sub-agent run after it returns, and the events a UI follows live.

Acorn throws a branch away once it returns and loses the cause of a failure. Here every run
leaves a :class:`SubAgentRun`: input, typed output, final state, the error *and* the
exception that caused it, the full message transcript, usage, cost, duration and the file
changes it made. A UI subscribes with ``add_listener`` and renders each run as an expandable
tool call of its parent (``tool_call_id`` links the two); it needs no import from here
beyond these dataclasses.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RunUsage

from branching_core.agent.hub import EventHub
from branching_core.errors import error_name
from branching_core.live.subagents.definition import MergeMode
from branching_core.run_states import SHARED_FINAL_STATES

log = logging.getLogger(__name__)

RunState = Literal[
    "running",
    "done",
    "failed",
    "terminated",
    "budget_exhausted",
    "budget_unknown",
    "timed_out",
    "step_limit",
    "conflict",
]
"""The names fork branches use too (``branching_core.run_states``), plus sub-agent ones:
``timed_out`` (its ``timeout_s``), ``step_limit`` (its ``max_steps``), ``conflict`` (its
files could not land in the parent)."""
FINAL_RUN_STATES: frozenset[str] = SHARED_FINAL_STATES | {"timed_out", "step_limit", "conflict"}


@dataclass(eq=False)
class SubAgentRun:
    """One sub-agent run: live while ``state == "running"``, a record afterwards."""

    run_id: str
    name: str
    """The definition's instance name (``branch(name=...)``)."""
    arguments: dict[str, Any]
    """The validated input, as JSON-ready data."""
    merge: MergeMode
    """The merge mode actually used (``end_result`` falls back to ``summarize``)."""
    depth: int = 1
    parent_run_id: str | None = None
    """The sub-agent that spawned this one (``None``: spawned by the root agent)."""
    tool_call_id: str | None = None
    """The parent's ``branch`` tool call this run answers (``None`` for programmatic runs)."""
    model_name: str | None = None
    state: RunState = "running"
    output: BaseModel | str | None = None
    result_text: str | None = None
    """Exactly what the parent received (the tool result or the ``[Branch Result]`` text)."""
    summary: str | None = None
    error: str | None = None
    exception: BaseException | None = field(default=None, repr=False)
    """The exception that ended the run (its own ``__cause__`` chain kept)."""
    messages: list[ModelMessage] = field(default_factory=list, repr=False)
    usage: RunUsage = field(default_factory=RunUsage)
    cost_usd: float = 0.0
    cost_known: bool = True
    workspace_branch: str | None = None
    """The sub-agent's copy-on-write branch (``/main/...``), ``None`` without a workspace."""
    workspace_path: str | None = None
    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    committed: bool = False
    """Whether its file changes reached the parent's view."""
    landed_by: str | None = None
    """``commit``, ``per_path`` (a sibling had committed first) or ``nothing`` to land."""
    conflicts: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    children: list[SubAgentRun] = field(default_factory=list, repr=False)
    _task: asyncio.Task[Any] | None = field(default=None, repr=False)
    _cancel_reason: str | None = field(default=None, repr=False)

    @property
    def is_running(self) -> bool:
        return self.state == "running"

    @property
    def duration_s(self) -> float | None:
        end = self.finished_at if self.finished_at is not None else time.time()
        return end - self.started_at

    @property
    def changed_paths(self) -> list[str]:
        return sorted({*self.created, *self.modified, *self.deleted})

    def cancel(self, reason: str = "cancelled by the user") -> bool:
        """Cancel a running sub-agent (its branch is aborted); False if it already ended."""
        if self._task is None or self._task.done():
            return False
        self._cancel_reason = reason
        self._task.cancel()
        return True

    def walk(self) -> Iterator[SubAgentRun]:
        """This run and every nested run under it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def transcript_lines(self, max_chars: int = 400) -> list[str]:
        """Plain-text lines of the transcript, for a UI's expanded tool call or a log."""
        return render_transcript(self.messages, max_chars=max_chars)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record (messages in pydantic-ai's own format)."""
        output: Any = self.output
        if isinstance(output, BaseModel):
            output = output.model_dump(mode="json")
        return {
            "run_id": self.run_id,
            "name": self.name,
            "arguments": self.arguments,
            "merge": self.merge,
            "depth": self.depth,
            "parent_run_id": self.parent_run_id,
            "tool_call_id": self.tool_call_id,
            "model": self.model_name,
            "state": self.state,
            "output": output,
            "result_text": self.result_text,
            "summary": self.summary,
            "error": self.error,
            "cause": _cause_chain(self.exception),
            "usage": {
                "requests": self.usage.requests,
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "tool_calls": self.usage.tool_calls,
            },
            "cost_usd": self.cost_usd if self.cost_known else None,
            "workspace_branch": self.workspace_branch,
            "created": self.created,
            "modified": self.modified,
            "deleted": self.deleted,
            "committed": self.committed,
            "landed_by": self.landed_by,
            "conflicts": self.conflicts,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "children": [child.run_id for child in self.children],
            "messages": ModelMessagesTypeAdapter.dump_python(self.messages, mode="json"),
        }


def _cause_chain(exc: BaseException | None) -> list[str]:
    chain: list[str] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(f"{error_name(exc)}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return chain


def _short(value: Any, max_chars: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def render_transcript(messages: list[ModelMessage], *, max_chars: int = 400) -> list[str]:
    """One line per part: ``user:``, ``assistant:``, ``-> tool(args)``, ``<- tool: result``."""
    lines: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    lines.append(f"user: {_short(part.content, max_chars)}")
                elif isinstance(part, ToolReturnPart):
                    mark = "<-" if part.outcome == "success" else "<- (failed)"
                    lines.append(f"{mark} {part.tool_name}: {_short(part.content, max_chars)}")
                elif isinstance(part, RetryPromptPart) and part.tool_name:
                    lines.append(f"<- (failed) {part.tool_name}: {_short(part.content, max_chars)}")
        elif isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, TextPart) and part.content:
                    lines.append(f"assistant: {_short(part.content, max_chars)}")
                elif isinstance(part, ToolCallPart):
                    lines.append(f"-> {part.tool_name}({_short(part.args or {}, max_chars)})")
    return lines


# -- events --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubAgentStarted:
    """A sub-agent began (``run.tool_call_id`` names the parent's tool call to expand)."""

    run: SubAgentRun


@dataclass(frozen=True)
class SubAgentProgress:
    """New messages were appended to ``run.messages`` (``new_messages`` are those)."""

    run: SubAgentRun
    new_messages: tuple[ModelMessage, ...]


@dataclass(frozen=True)
class SubAgentToolResult:
    """One of the sub-agent's tool calls completed (live, before the next model request).

    Tool results reach ``run.messages`` only with the next model request; this event shows
    them as soon as each tool returns. ``outcome`` is ``success`` or ``failed``.
    """

    run: SubAgentRun
    tool_name: str
    tool_call_id: str
    content: str
    outcome: str


@dataclass(frozen=True)
class SubAgentFinished:
    """A sub-agent reached its final state (``run.state``, ``run.error``, ``run.result_text``)."""

    run: SubAgentRun


SubAgentEvent = SubAgentStarted | SubAgentProgress | SubAgentToolResult | SubAgentFinished
Listener = Callable[[SubAgentEvent], None]


__all__ = [
    "FINAL_RUN_STATES",
    "EventHub",
    "Listener",
    "RunState",
    "SubAgentEvent",
    "SubAgentFinished",
    "SubAgentProgress",
    "SubAgentRun",
    "SubAgentStarted",
    "SubAgentToolResult",
    "render_transcript",
]
