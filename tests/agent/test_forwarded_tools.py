"""The forwarded workspace toolset offers exactly the local tools and validates like them.

A fork branch on a cluster sees ``forwarded_workspace_toolset``: its model must be shown
the same tool definitions as a local branch's ``WorkspaceToolset``, its arguments must be
validated here (before a call crosses to the node), and a ``ToolFailed`` raised where the
files are must reach the model unchanged. The "remote" side here is a real
``WorkspaceToolset`` on a real directory, called through the forwarder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from branching_core.agent.forwarded_tools import forwarded_workspace_toolset
from branching_core.agent.toolset import WorkspaceToolset


def _defs(toolset: Any) -> dict[str, Any]:
    return {name: tool.tool_def for name, tool in toolset.tools.items()}


def test_the_forwarded_tools_are_defined_exactly_as_the_local_ones(tmp_path: Path) -> None:
    async def never(tool: str, kwargs: dict[str, Any]) -> Any:
        raise AssertionError("not called")

    local = _defs(WorkspaceToolset(tmp_path))
    forwarded = _defs(forwarded_workspace_toolset(never))
    assert list(forwarded) == list(local)
    assert forwarded == local  # names, descriptions, JSON schemas, sequential barriers


async def test_calls_are_validated_here_and_failures_come_back_unchanged(tmp_path: Path) -> None:
    target = WorkspaceToolset(tmp_path)
    seen: list[tuple[str, dict[str, Any]]] = []

    async def remote(tool: str, kwargs: dict[str, Any]) -> Any:
        seen.append((tool, kwargs))
        return getattr(target, tool)(**kwargs)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
                   if isinstance(p, ToolReturnPart | RetryPromptPart)]
        script: list[ModelResponse] = [
            ModelResponse([ToolCallPart("write_file", {"path": "x.txt", "content": "hi"})]),
            ModelResponse([ToolCallPart("read_file", {"path": "x.txt", "offset": "0"})]),
            ModelResponse([ToolCallPart("read_file", {"path": "missing.txt"})]),
            ModelResponse([ToolCallPart("read_file", {"path": 5, "offset": "many"})]),
        ]
        if len(returns) < len(script):
            return script[len(returns)]
        return ModelResponse([TextPart("\n---\n".join(str(p.content) for p in returns))])

    agent = Agent(FunctionModel(respond), toolsets=[forwarded_workspace_toolset(remote)])
    result = await agent.run("go")
    outputs = result.output.split("\n---\n")
    assert outputs[0] == "created x.txt (2 bytes)"
    assert outputs[1] == "hi"
    assert outputs[2] == "'missing.txt' does not exist"  # the ToolFailed text, unchanged
    assert (tmp_path / "x.txt").read_text() == "hi"
    # "0" was coerced to 0 here; the invalid call never crossed over
    assert seen[1] == ("read_file", {"path": "x.txt", "offset": 0, "limit": 2000})
    assert len(seen) == 3 and "input should be a valid string" in outputs[3].lower()

