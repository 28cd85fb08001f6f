"""Scripted FunctionModels for the fork tests: behaviour keyed by the branch's steer prompt."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

Step = ToolCallPart | str | Callable[[list[ModelMessage]], Any]


def user_prompts(messages: list[ModelMessage]) -> list[str]:
    out = []
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if p.part_kind == "user-prompt":
                    out.append(p.content if isinstance(p.content, str) else json.dumps(p.content))
    return out


def request_text(messages: list[ModelMessage]) -> str:
    """Every user prompt in the request, joined (what the model was told)."""
    return "\n".join(user_prompts(messages))


def first_branch_prompt(messages: list[ModelMessage], keys: list[str]) -> str | None:
    """The last user prompt that is one of ``keys`` (a branch's steer)."""
    for text in reversed(user_prompts(messages)):
        if text in keys:
            return text
    return None


def tool_results_after(messages: list[ModelMessage], prompt: str) -> list[Any]:
    """Tool-return parts after the request holding ``prompt``."""
    seen = False
    out = []
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if p.part_kind == "user-prompt" and p.content == prompt:
                    seen, out = True, []
                elif seen and p.part_kind == "tool-return":
                    out.append(p)
    return out


def call(tool: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool, args)


class Scripted:
    """A FunctionModel whose answers follow a script chosen by the steer prompt.

    ``scripts[prompt]`` is a list of steps; step *n* is answered after *n* tool results
    came back since that prompt. Every request is recorded in ``calls`` as
    ``(script_key, messages)``.
    """

    def __init__(
        self, scripts: dict[str, list[Step]], *, name: str = "scripted", default: str = "done"
    ) -> None:
        self.scripts = scripts
        self.calls: list[tuple[str | None, list[ModelMessage]]] = []
        self.default = default
        self.model = FunctionModel(self._respond, model_name=name)

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        key = first_branch_prompt(messages, list(self.scripts))
        self.calls.append((key, list(messages)))
        if key is None:
            return ModelResponse(parts=[TextPart(self.default)])
        steps = self.scripts[key]
        n = len(tool_results_after(messages, key))
        if n >= len(steps):
            return ModelResponse(parts=[TextPart(f"{key}: finished")])
        step = steps[n]
        if callable(step) and not isinstance(step, ToolCallPart):
            step = step(messages)
            if hasattr(step, "__await__"):
                step = await step
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=[ToolCallPart(step.tool_name, step.args)])

    def requests_for(self, key: str) -> list[list[ModelMessage]]:
        return [m for k, m in self.calls if k == key]
