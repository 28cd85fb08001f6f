"""A pydantic-ai ``Agent`` with ``forkdeck mcp`` as its MCP toolset (pydantic-ai's own MCP
client, ``MCPToolset`` over stdio), driven by a ``FunctionModel``: it creates a branch,
runs the failing test there, fixes the file at the branch path with its own file tool,
re-runs the test and commits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.mcp.conftest import REPO, SERVER, leftovers, server_env, snapshot, wait_until

TEST = "python3 -c 'import sys; sys.path.insert(0, \"src\"); import calc; " \
       "assert calc.add(2, 3) == 5, calc.add(2, 3)'"


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
            if isinstance(p, ToolReturnPart)]


def _content(part: ToolReturnPart) -> dict[str, Any]:
    value = part.content
    if isinstance(value, str):
        value = json.loads(value)
    assert isinstance(value, dict), value
    return value


def developer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The scripted model: one step per tool result seen so far."""
    names = {t.name for t in info.function_tools}
    assert {"branch_create", "branch_run", "branch_commit", "write_file"} <= names
    done = _returns(messages)
    step = len(done)
    if step == 0:
        return ModelResponse(parts=[ToolCallPart("branch_create", {"name": "fix-add"})])
    path = _content(done[0])["path"]
    if step == 1:
        return ModelResponse(parts=[ToolCallPart("branch_run",
                                                 {"label": "fix-add", "command": TEST})])
    if step == 2:
        failed = _content(done[1])
        assert failed["exit_code"] != 0 and "AssertionError" in failed["stderr"], failed
        fixed = "def add(a, b):\n    return a + b\n"
        return ModelResponse(parts=[ToolCallPart(
            "write_file", {"path": f"{path}/src/calc.py", "content": fixed})])
    if step == 3:
        return ModelResponse(parts=[ToolCallPart("branch_run",
                                                 {"label": "fix-add", "command": TEST})])
    if step == 4:
        assert _content(done[3])["exit_code"] == 0, done[3]
        return ModelResponse(parts=[ToolCallPart("branch_commit", {"label": "fix-add"})])
    landed = _content(done[4])
    return ModelResponse(parts=[TextPart(f"committed {landed['modified']}")])


async def test_agent_fixes_a_failing_test_in_a_branch_and_commits(ws: Path) -> None:
    before = snapshot(ws)
    toolset = MCPToolset(
        StdioTransport(command=SERVER[0], args=[*SERVER[1:], str(ws)], env=server_env(),
                       cwd=str(REPO), keep_alive=False),  # the server ends with the agent
        tool_error_behavior="error",
    )
    agent = Agent(FunctionModel(developer), toolsets=[toolset])

    @agent.tool_plain
    def write_file(path: str, content: str) -> str:
        """The agent's own file tool (outside MCP), as Claude Code's Write would be."""
        Path(path).write_text(content)
        return f"wrote {len(content)} bytes to {path}"

    async with agent:
        result = await agent.run("make the calc test pass")
    assert result.output == "committed ['src/calc.py']"
    assert (ws / "src" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    changed = {k for k in snapshot(ws) if snapshot(ws)[k] != before.get(k)}
    assert changed == {"src/calc.py"}
    assert wait_until(lambda: leftovers(ws) == []), leftovers(ws)
