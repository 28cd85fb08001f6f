"""Trimming a conversation so another run can start from it.

A fork or a sub-agent usually starts *inside* a tool call (the parent model called
``fork_run`` or ``branch``), so the parent's latest response holds tool calls with no result
yet. A run must not start from a history asking for results nobody will send: those calls
are removed, results whose call is missing too, and messages left empty are dropped. The
fork layer (``branching_core.fork.history``) and sub-agents share this one implementation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
)

_RESULT_KINDS = frozenset({"tool-return", "retry-prompt", "retry-feedback"})


def _result_id(part: Any) -> str | None:
    if getattr(part, "part_kind", None) in _RESULT_KINDS:
        return getattr(part, "tool_call_id", None)
    return None


def trim_unanswered_tool_calls(
    messages: Sequence[ModelMessage], *, drop_system_prompts: bool = False
) -> list[ModelMessage]:
    """A copy of ``messages`` in which every tool call has its result and every result its call.

    ``drop_system_prompts`` also removes system prompt parts (a sub-agent speaks with its
    own). The input is not modified; untouched messages are reused, not copied.
    """
    answered: set[str] = set()
    called: set[str] = set()
    for message in messages:
        for part in message.parts:
            if isinstance(message, ModelRequest):
                if rid := _result_id(part):
                    answered.add(rid)
            elif isinstance(part, ToolCallPart):
                called.add(part.tool_call_id)
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            parts: list[Any] = [
                p
                for p in message.parts
                if not (isinstance(p, ToolCallPart) and p.tool_call_id not in answered)
            ]
        else:
            parts = [
                p
                for p in message.parts
                if not (drop_system_prompts and isinstance(p, SystemPromptPart))
                and ((rid := _result_id(p)) is None or rid in called)
            ]
        if not parts:
            continue
        out.append(
            message
            if len(parts) == len(message.parts)
            else dataclasses.replace(message, parts=parts)
        )
    return out


__all__ = ["trim_unanswered_tool_calls"]
