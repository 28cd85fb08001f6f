"""The tools a parent and its sub-agents talk through.

* ``branch`` (on the parent): no arguments lists every registered sub-agent with its
  description and input schema; ``name`` plus the sub-agent's input fields runs it.
* ``call_parent_tool`` (on a sub-agent): no arguments lists the parent's own tools; ``name``
  plus arguments runs one of them *in the parent's run*. Only the immediate parent's own
  tools are reachable: never ``branch``, the finish tool, output tools, tools the parent
  itself reached through *its* parent, nor the parent's file tools (a sub-agent's files live
  in its own copy-on-write branch; the parent's file tools would write around it).
* The finish tool (``__finish__``) is the sub-agent's output tool carrying ``final_output``.

``branch`` and ``call_parent_tool`` take free-form keyword arguments (as in seed 002), so
they are built as tool definitions with an open JSON schema rather than Python signatures.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_ai import ModelRetry, ToolFailed
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from branching_core.live.subagents.definition import MERGE_MODES, SubAgent

BRANCH_TOOL = "branch"
CALL_PARENT_TOOL = "call_parent_tool"
FINISH_TOOL = "__finish__"
RESERVED_TOOL_NAMES = frozenset({BRANCH_TOOL, CALL_PARENT_TOOL, FINISH_TOOL})
NESTED_ARGUMENT_KEYS = ("arguments", "input", "kwargs")

_ANY_ARGS = SchemaValidator(schema=core_schema.dict_schema(keys_schema=core_schema.str_schema()))


def split_arguments(
    args: dict[str, Any], control: Collection[str], model: type[BaseModel] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(control arguments, the rest)``; a lone nested ``arguments={...}`` is unwrapped.

    Seed 002 passes inputs as flat keyword arguments; many models nest them instead. Both
    work unless the input model itself has a field of that name.
    """
    ctl = {k: v for k, v in args.items() if k in control}
    rest = {k: v for k, v in args.items() if k not in control}
    fields = set(model.model_fields) if model is not None else set()
    if len(rest) == 1:
        ((key, value),) = rest.items()
        if key in NESTED_ARGUMENT_KEYS and key not in fields and isinstance(value, dict):
            rest = dict(value)
    return ctl, rest


def validation_message(exc: ValidationError) -> str:
    """A short one-line summary of pydantic's errors (``field: message; ...``)."""
    parts = []
    for error in exc.errors()[:5]:
        loc = ".".join(str(p) for p in error.get("loc", ())) or "(input)"
        parts.append(f"{loc}: {error.get('msg', 'invalid')}")
    return "; ".join(parts)


def _leaf(toolset: Any) -> Any:
    seen = 0
    while hasattr(toolset, "wrapped") and seen < 20:
        toolset = toolset.wrapped
        seen += 1
    return toolset


class _OpenToolset(AbstractToolset[Any]):
    """Base for toolsets whose tools take free-form keyword arguments."""

    def __init__(self, id: str | None) -> None:
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    def _tool(self, tool_def: ToolDefinition) -> ToolsetTool[Any]:
        return ToolsetTool(toolset=self, tool_def=tool_def, max_retries=1, args_validator=_ANY_ARGS)


BranchHandler = Callable[[RunContext[Any], dict[str, Any]], Awaitable[str]]


class BranchToolset(_OpenToolset):
    """The generated ``branch`` tool of one registry (see the module docstring)."""

    def __init__(
        self,
        definitions: Callable[[], list[SubAgent]],
        handler: BranchHandler,
        *,
        id: str | None = None,
    ) -> None:
        super().__init__(id)
        self._definitions = definitions
        self._handler = handler

    async def get_instructions(self, ctx: RunContext[Any]) -> str | None:
        names = [d.name for d in self._definitions()]
        if not names:
            return None
        return (
            "You can delegate focused jobs to sub-agents with the `branch` tool "
            f"({', '.join(names)}). Call `branch()` with no arguments to see each one's input; "
            "several `branch` calls in one response run in parallel."
        )

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        definitions = self._definitions()
        if not definitions:
            return {}
        names = [d.name for d in definitions]
        schema = {
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "enum": names,
                    "description": "The sub-agent to run; omit to list them all.",
                },
                "merge": {
                    "type": "string",
                    "enum": list(MERGE_MODES),
                    "description": "end_result (default): its final output; summarize: a "
                    "summary of what it did plus the final output.",
                },
            },
            "additionalProperties": True,
        }
        description = (
            "Spawn a specialised sub-agent that inherits this conversation, does one job in "
            "its own copy of the workspace and returns its result. With no arguments: list "
            "the sub-agents and their input schemas. With name=... and that sub-agent's input "
            "fields as further arguments: run it."
        )
        tool_def = ToolDefinition(
            name=BRANCH_TOOL, parameters_json_schema=schema, description=description
        )
        return {BRANCH_TOOL: self._tool(tool_def)}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        return await self._handler(ctx, tool_args)


class ParentToolset(_OpenToolset):
    """``call_parent_tool`` and, optionally, the parent's own tools proxied directly.

    ``parent_ctx`` is the parent run's context at the moment it spawned this sub-agent; the
    parent is blocked in that tool call while the sub-agent runs, so its tool manager is
    the one of that very step. ``reserved`` are this sub-agent's own tool names, which an
    inherited tool must not shadow.
    """

    def __init__(
        self,
        parent_ctx: RunContext[Any],
        *,
        inherit: bool,
        reserved: Collection[str] = (),
        allow: Collection[str] | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id)
        self.parent_ctx = parent_ctx
        self.inherit = inherit
        self.allow = frozenset(allow) if allow is not None else None
        self.reserved = frozenset(reserved) | RESERVED_TOOL_NAMES

    def parent_tools(self) -> dict[str, ToolsetTool[Any]]:
        """The parent's own tools (see the module docstring for what is left out)."""
        from branching_core.agent.toolset import WorkspaceToolset

        manager = self.parent_ctx.tool_manager
        if manager is None or manager.tools is None:
            return {}
        own: dict[str, ToolsetTool[Any]] = {}
        for name, tool in manager.tools.items():
            leaf = _leaf(tool.toolset)
            if (
                name in RESERVED_TOOL_NAMES
                or tool.tool_def.kind == "output"
                or isinstance(leaf, (_OpenToolset, WorkspaceToolset))
                or (self.allow is not None and name not in self.allow)
            ):
                continue
            own[name] = tool
        return own

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        call_schema = {
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": "The parent tool to run; omit to list the parent's tools.",
                },
            },
            "additionalProperties": True,
        }
        tools = {
            CALL_PARENT_TOOL: self._tool(
                ToolDefinition(
                    name=CALL_PARENT_TOOL,
                    parameters_json_schema=call_schema,
                    description=(
                        "Use a tool of the agent that spawned you. With no arguments: list "
                        "its tools and their schemas. With name=... and that tool's arguments: "
                        "run it and get its result."
                    ),
                )
            )
        }
        if self.inherit:
            for name, tool in self.parent_tools().items():
                if name not in self.reserved:
                    tools[name] = self._tool(tool.tool_def)
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if name != CALL_PARENT_TOOL:
            return await self._run_parent_tool(name, tool_args)
        target = tool_args.get("name")
        if target in (None, ""):
            listing = [
                {
                    "name": t.tool_def.name,
                    "description": t.tool_def.description or "",
                    "schema": t.tool_def.parameters_json_schema,
                }
                for t in self.parent_tools().values()
            ]
            return json.dumps(listing, indent=2, ensure_ascii=False)
        if not isinstance(target, str):
            raise ToolFailed("call_parent_tool: name must be a string")
        _, args = split_arguments(tool_args, {"name"}, None)
        return await self._run_parent_tool(target, args)

    async def _run_parent_tool(self, name: str, args: dict[str, Any]) -> Any:
        available = self.parent_tools()
        if name not in available:
            shown = ", ".join(sorted(available)) or "none"
            raise ToolFailed(f"the parent has no tool {name!r} you may use (available: {shown})")
        manager = self.parent_ctx.tool_manager
        assert manager is not None
        try:
            return await manager.handle_call(
                ToolCallPart(tool_name=name, args=args), wrap_validation_errors=False
            )
        except ValidationError as exc:
            raise ToolFailed(f"invalid arguments for {name}: {validation_message(exc)}") from None
        except (ModelRetry, ToolFailed) as exc:
            raise ToolFailed(f"{name} failed: {exc}") from None


__all__ = [
    "BRANCH_TOOL",
    "CALL_PARENT_TOOL",
    "FINISH_TOOL",
    "RESERVED_TOOL_NAMES",
    "BranchToolset",
    "ParentToolset",
    "split_arguments",
    "validation_message",
]
