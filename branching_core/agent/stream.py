"""One typed translator of pydantic-ai stream events, for fork branches and sub-agents.

``agent.iter()`` hands out pydantic-ai's own event classes (``PartStartEvent``,
``PartDeltaEvent``, ``FunctionToolCallEvent``, ``FunctionToolResultEvent``, ...). Fork
branches (``fork/run_loop.py``), sub-agent runs (``live/subagents/runner.py``) and the
server model's budget check all need the same three facts from them: text the model is
writing, a tool being called, a tool's result. :func:`translate` is the one place that
reads pydantic-ai's events, with ``isinstance`` on the exported classes (a renamed or
reshaped event is then a type error, not a silent ``getattr`` default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.messages import (
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)

ToolOutcome = Literal["success", "failed", "denied", "interrupted", "retried"]
"""``ToolReturnPart.outcome`` in pydantic-ai 2.x (a retry is a tool return with ``retried``)."""


@dataclass(frozen=True)
class TextChunk:
    """Text the model is writing (a new text part, or a delta of one)."""

    text: str


@dataclass(frozen=True)
class ToolCalled:
    """A function tool is about to run."""

    tool_name: str
    args: Any
    tool_call_id: str


@dataclass(frozen=True)
class ToolReturned:
    """A function tool finished (``content`` as text, ``outcome`` as pydantic-ai reports it)."""

    tool_name: str
    tool_call_id: str
    content: str
    outcome: ToolOutcome


StreamItem = TextChunk | ToolCalled | ToolReturned


def stream_text(event: object) -> str | None:
    """The text a model-response stream event adds, if any (non-empty)."""
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return event.part.content or None
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta or None
    return None


def _as_text(content: object) -> str:
    return content if isinstance(content, str) else repr(content)


def translate(event: object) -> StreamItem | None:
    """What ``event`` (any pydantic-ai stream event) means to a fork branch or sub-agent;
    ``None`` for events neither follows (thinking, part ends, final-result markers...)."""
    text = stream_text(event)
    if text is not None:
        return TextChunk(text)
    if isinstance(event, FunctionToolCallEvent):
        part = event.part
        return ToolCalled(tool_name=part.tool_name, args=part.args, tool_call_id=part.tool_call_id)
    if isinstance(event, FunctionToolResultEvent):
        result = event.part
        return ToolReturned(
            tool_name=result.tool_name,
            tool_call_id=result.tool_call_id,
            content=_as_text(result.content),
            outcome=result.outcome,
        )
    return None


__all__ = [
    "StreamItem",
    "TextChunk",
    "ToolCalled",
    "ToolOutcome",
    "ToolReturned",
    "stream_text",
    "translate",
]
