"""The conversation a sub-agent inherits, and the ``[Branch Result]`` message it leaves.

The parent usually spawns from inside a tool call, so its latest response holds tool calls
(this ``branch`` call, and its siblings when several run at once) that have no result yet;
a sub-agent must not start from a history asking for results nobody will send
(``branching_core.agent.history`` trims it, for forks and sub-agents alike).

The parent's system prompt is dropped: a sub-agent speaks with its own (seed 002).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    UserPromptPart,
)

from branching_core.agent.history import trim_unanswered_tool_calls

BRANCH_RESULT_PREFIX = "[Branch Result]"


def inherited_history(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """A copy of ``messages`` without unanswered tool calls, orphan results, system prompts."""
    return trim_unanswered_tool_calls(messages, drop_system_prompts=True)


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
