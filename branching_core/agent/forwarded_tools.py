"""The workspace toolset, forwarded: for a branch whose files live somewhere else.

A fork branch on a Ray cluster keeps its model loop here while its files live in an
actor on a worker node. Its model must see exactly the tools a local branch sees, so
this toolset copies every tool of :class:`WorkspaceToolset` (name, description, JSON
schema, argument validator, sequential barrier) and replaces only the function: a call
is validated here as usual, then ``call(tool_name, arguments)`` runs it where the files
are. A ``ToolFailed`` raised there is raised here unchanged, so the model reads the same
failure a local branch would produce.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset

from branching_core.agent.toolset import INSTRUCTIONS, WorkspaceToolset

ToolCall = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""``call(tool_name, validated_arguments)``: the tool's result text (or it raises)."""


@functools.cache
def _template() -> WorkspaceToolset:
    """A workspace toolset used only for its tool definitions (it is never called)."""
    return WorkspaceToolset(Path(__file__).parent)


def _forwarder(call: ToolCall, name: str) -> Callable[..., Awaitable[Any]]:
    async def forward(**arguments: Any) -> Any:
        return await call(name, arguments)

    forward.__name__ = name
    return forward


def forwarded_workspace_toolset(call: ToolCall, *, id: str | None = None) -> FunctionToolset[Any]:
    """The workspace tools, each call handed to ``call`` (see the module docstring)."""
    tools: list[Tool[Any]] = []
    for name, tool in _template().tools.items():
        forward = _forwarder(call, name)
        schema = dataclasses.replace(tool.function_schema, function=forward, is_async=True)
        tools.append(
            Tool(
                forward,
                takes_ctx=False,
                name=name,
                description=tool.description,
                docstring_format=tool.docstring_format,
                sequential=tool.sequential,
                function_schema=schema,
            )
        )
    return FunctionToolset(tools, id=id, instructions=INSTRUCTIONS)


__all__ = ["ToolCall", "forwarded_workspace_toolset"]
