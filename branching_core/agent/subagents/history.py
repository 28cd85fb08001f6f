"""The conversation a sub-agent inherits, and the ``[Branch Result]`` message it leaves.

The parent usually spawns from inside a tool call, so its latest response holds tool calls
(this ``branch`` call, and its siblings when several run at once) that have no result yet;
a sub-agent must not start from a history asking for results nobody will send. The same
trimming lives in ``branching_core.fork.history``; the fork layer sits above this one and
imports it, so it is restated here (a dozen lines) rather than imported upwards.

The parent's system prompt is dropped: a sub-agent speaks with its own (seed 002).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
    UserPromptPart,
)

_RESULT_KINDS = frozenset({"tool-return", "retry-prompt", "retry-feedback"})
BRANCH_RESULT_PREFIX = "[Branch Result]"


def _result_id(part: Any) -> str | None:
    if getattr(part, "part_kind", None) in _RESULT_KINDS:
        return getattr(part, "tool_call_id", None)
    return None


def inherited_history(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """A copy of ``messages`` without unanswered tool calls, orphan results, system prompts."""
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
                if not isinstance(p, SystemPromptPart)
                and ((rid := _result_id(p)) is None or rid in called)
            ]
        if parts:
            out.append(dataclasses.replace(message, parts=parts))
    return out


def input_prompt(name: str, description: str, arguments: BaseModel | None) -> str:
    """The user message that starts a sub-agent: who it is and what it was asked."""
    lines = [f"[Branch: {name}] You are the sub-agent {name!r}: {description}"]
    if arguments is not None:
        lines.append("Input:")
        lines.append(json.dumps(arguments.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        lines.append("Work from the conversation above.")
    return "\n".join(lines)


def branch_result_message(name: str, text: str) -> ModelRequest:
    """The ``[Branch Result]`` user message recorded in the parent's history."""
    return ModelRequest(parts=[UserPromptPart(branch_result_text(name, text))])


def branch_result_text(name: str, text: str) -> str:
    return f"{BRANCH_RESULT_PREFIX} {name}:\n{text}"


__all__ = [
    "BRANCH_RESULT_PREFIX",
    "branch_result_message",
    "branch_result_text",
    "inherited_history",
    "input_prompt",
]
