"""Copying a conversation to a branch: trim unanswered tool calls, (de)serialise for disk.

A fork usually happens *inside* a tool call (the parent model called ``fork_run``), so the
parent's latest response holds tool calls that have no result yet. A branch must not start
from a history whose last response asks for results nobody will ever send, so those calls
are removed (and a response left empty is dropped). The same applies to a branch stopped
mid-step (budget, terminate): its partial history is trimmed before it is merged or resumed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
)

_RESULT_KINDS = frozenset({"tool-return", "retry-prompt", "retry-feedback"})


def _result_id(part: Any) -> str | None:
    if getattr(part, "part_kind", None) in _RESULT_KINDS:
        return getattr(part, "tool_call_id", None)
    return None


def trim_unanswered_tool_calls(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """A copy of ``messages`` in which every tool call has its result and every result its call.

    Tool calls whose id never gets a result in a later request are removed from their
    response; results whose call is missing are removed from their request; messages left
    with no parts are dropped. The input is not modified.
    """
    answered: set[str] = set()
    called: set[str] = set()
    for message in messages:
        for part in message.parts:
            if isinstance(message, ModelRequest):
                rid = _result_id(part)
                if rid:
                    answered.add(rid)
            elif isinstance(part, ToolCallPart):
                called.add(part.tool_call_id)
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            parts = [
                p
                for p in message.parts
                if not (isinstance(p, ToolCallPart) and p.tool_call_id not in answered)
            ]
        else:
            parts = [p for p in message.parts if (rid := _result_id(p)) is None or rid in called]
        if not parts:
            continue
        out.append(
            message
            if len(parts) == len(message.parts)
            else dataclasses.replace(message, parts=parts)
        )
    return out


def copy_history(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """The history a branch starts from: a trimmed, independent copy of the parent's."""
    return trim_unanswered_tool_calls(list(messages))


def dump_history(messages: Sequence[ModelMessage]) -> list[Any]:
    """JSON-ready form of a history (pydantic-ai's own ``ModelMessagesTypeAdapter``)."""
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")


def dumps_history(messages: Sequence[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(list(messages))


def load_history(data: Any) -> list[ModelMessage]:
    """Inverse of :func:`dump_history` (also accepts JSON text/bytes)."""
    if isinstance(data, (str, bytes, bytearray)):
        return ModelMessagesTypeAdapter.validate_json(data)
    return ModelMessagesTypeAdapter.validate_python(data)


def prompts_in(messages: Sequence[ModelMessage]) -> list[str]:
    """Every user-prompt text in ``messages``, in order (handy for tests and UIs)."""
    texts: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if getattr(part, "part_kind", None) == "user-prompt":
                    content = part.content
                    texts.append(
                        content if isinstance(content, str) else json.dumps(content, default=str)
                    )
    return texts


__all__ = [
    "copy_history",
    "dump_history",
    "dumps_history",
    "load_history",
    "prompts_in",
    "trim_unanswered_tool_calls",
]
