"""A parent turn's pydantic-ai stream events, told to a :class:`TurnSink` (the message list,
or a test's recorder) as text deltas, tool calls and tool results.

Why apart from ``app.session``: what the transcript is told follows pydantic-ai's event
shapes and changes with them, not with how the session runs a turn.
"""

from __future__ import annotations

from typing import Any, Protocol


class TurnSink(Protocol):
    """Where a parent turn's stream goes (the message list, or a test's recorder)."""

    def on_text(self, delta: str) -> None: ...

    def on_tool_call(self, tool_call_id: str, tool_name: str, args: Any) -> None: ...

    def on_tool_result(self, tool_call_id: str, tool_name: str, content: str, ok: bool) -> None: ...


def stream_text(event: Any, sink: TurnSink) -> None:
    """A model request's text, part by part and delta by delta."""
    kind = getattr(event, "event_kind", "")
    if kind == "part_start" and getattr(event.part, "part_kind", "") == "text":
        if event.part.content:
            sink.on_text(event.part.content)
    elif kind == "part_delta":
        text = getattr(event.delta, "content_delta", None)
        if text and getattr(event.delta, "part_delta_kind", "") == "text":
            sink.on_text(text)


def tool_event(event: Any, sink: TurnSink) -> None:
    """A tool call as it starts, and its result (a retry prompt reads as a failure)."""
    kind = getattr(event, "event_kind", "")
    part = getattr(event, "part", None)
    if part is None:
        return
    if kind == "function_tool_call":
        sink.on_tool_call(part.tool_call_id, part.tool_name, part.args)
    elif kind == "function_tool_result":
        content = getattr(part, "content", "")
        ok = getattr(part, "part_kind", "") == "tool-return" and (
            getattr(part, "outcome", "success") != "failed"
        )
        text = content if isinstance(content, str) else repr(content)
        if getattr(part, "part_kind", "") == "retry-prompt":
            text = part.model_response()
        sink.on_tool_result(part.tool_call_id, getattr(part, "tool_name", "") or "", text, ok)
