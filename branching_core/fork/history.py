"""Copying a conversation to a branch: trim unanswered tool calls, (de)serialise for disk.

A fork usually happens *inside* a tool call (the parent model called ``fork_run``), so the
parent's latest response holds tool calls that have no result yet. A branch must not start
from a history whose last response asks for results nobody will ever send, so those calls
are removed (and a response left empty is dropped). The same applies to a branch stopped
mid-step (budget, terminate): its partial history is trimmed before it is merged or resumed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    UserPromptPart,
)

from branching_core.agent.history import trim_unanswered_tool_calls


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
                if isinstance(part, UserPromptPart):
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
