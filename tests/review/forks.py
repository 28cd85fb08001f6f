"""Shared setup for the review tests: real workspaces, real coordinators, scripted models.

Branch agents are pydantic-ai ``Agent``s on the fork tests' ``Scripted`` FunctionModel;
judges are ``Agent``s on a FunctionModel that answers with a ``JudgeVerdict`` tool call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from branching_core.fork import BranchSpec
from branching_core.live import ForkCoordinator
from branching_core.workspace import Workspace
from tests.fork.helpers import Scripted, Step, call, request_text
from tests.support.project_fixtures import project, runner, ws

__all__ = ["JudgeScript", "call", "fork_with", "project", "runner", "ws"]


async def fork_with(
    ws: Workspace,
    scripts: dict[str, list[Step]],
    *,
    runner: Any = None,
    strategy: Any = None,
) -> ForkCoordinator:
    """Fork one branch per label in ``scripts`` (steer = ``"do <label>"``) and wait for all."""
    scripted = Scripted({f"do {label}": steps for label, steps in scripts.items()})
    coord = ForkCoordinator(Agent(scripted.model), workspace=ws, command_runner=runner)
    specs = [BranchSpec(label, f"do {label}") for label in scripts]
    kwargs = {"strategy": strategy} if strategy is not None else {}
    await coord.fork(specs, parent_history=[], **kwargs)
    await coord.wait(timeout=30)
    return coord


class JudgeScript:
    """A judge FunctionModel: answer *n* is ``answers[n]`` (a dict of ``JudgeVerdict`` fields).

    Every prompt the judge received is kept in ``prompts`` (the user prompts of each request).
    """

    def __init__(self, answers: Sequence[dict[str, Any]], *, name: str = "judge") -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []
        self.model = FunctionModel(self._respond, model_name=name)

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.prompts.append(request_text(messages))
        answer = self.answers[min(len(self.prompts) - 1, len(self.answers) - 1)]
        tool = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(tool, json.dumps(answer))])

    @property
    def asked(self) -> int:
        return len(self.prompts)


def verdict(winner: str, confidence: float = 0.9, rationale: str = "best") -> dict[str, Any]:
    return {"winner": winner, "confidence": confidence, "rationale": rationale}
