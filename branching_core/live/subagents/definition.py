"""``SubAgent``: the declarative description of one kind of sub-agent branch.

Acorn identifies a branch by its class name, so one definition cannot run twice with
different settings side by side. Here a definition is a value with an instance ``name``:
``FACT_CHECK.with_(name="fact_check_strict", model=...)`` registers the same job again under
another name and other settings, and both can run at once.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from branching_core.errors import InvalidArgumentError, InvalidTypeError

MergeMode = Literal["end_result", "summarize"]
MERGE_MODES: tuple[MergeMode, ...] = ("end_result", "summarize")

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$")
DEFAULT_MAX_STEPS = 10


def _is_model_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


@dataclass(frozen=True)
class SubAgent:
    """One specialised sub-agent a parent can spawn with ``branch(name=...)``.

    ``model`` is a model string (resolved with ``branching_core.agent.resolve_model``), a
    pydantic-ai ``Model``, or ``None`` for the parent's model. ``system_prompt`` replaces the
    parent's (it is not inherited); the parent's conversation is. ``tools`` are functions or
    ``Tool`` objects and ``toolsets`` any pydantic-ai toolsets, both only for this sub-agent.
    ``initial_input`` (a pydantic model) types the arguments of ``branch(name=..., **kwargs)``;
    ``final_output`` (a pydantic model) is what the sub-agent hands back through the finish
    tool; without it the sub-agent answers in text and the parent gets a summary.
    ``max_steps`` bounds model requests, ``timeout_s`` wall-clock time (the sub-agent is
    cancelled), ``budget_usd`` the priced cost of its responses (checked after each one).
    ``branches`` are nested sub-agents this one may spawn itself. ``inherit_parent_tools``
    exposes the parent's own tools directly (as in Acorn) besides ``call_parent_tool``;
    ``parent_tools`` narrows that to an allow-list of names (least privilege: e.g. keep a
    fact-checker away from a parent's ``fork_run``). ``workspace_tools`` gives it file and
    shell tools bound to its own copy-on-write branch.
    """

    name: str
    description: str = ""
    model: Any = None
    system_prompt: str | None = None
    tools: Sequence[Callable[..., Any] | Any] = ()
    toolsets: Sequence[Any] = ()
    initial_input: type[BaseModel] | None = None
    final_output: type[BaseModel] | None = None
    max_steps: int | None = DEFAULT_MAX_STEPS
    timeout_s: float | None = None
    budget_usd: float | None = None
    branches: Sequence[SubAgent] = ()
    inherit_parent_tools: bool = True
    parent_tools: Sequence[str] | None = None
    """Allow-list of parent tool names this sub-agent may reach (``None``: all of them)."""
    workspace_tools: bool = True
    summary_model: Any = None
    """Model for ``merge="summarize"`` (default: this sub-agent's model)."""
    model_settings: Any = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise InvalidArgumentError(
                f"sub-agent name {self.name!r} must start with a letter and contain only "
                "letters, digits, '_' or '-' (at most 64 characters)"
            )
        for attr in ("initial_input", "final_output"):
            value = getattr(self, attr)
            if value is not None and not _is_model_class(value):
                raise InvalidTypeError(f"{self.name}: {attr} must be a pydantic BaseModel subclass")
        if self.max_steps is not None and self.max_steps < 1:
            raise InvalidArgumentError(
                f"{self.name}: max_steps must be at least 1, not {self.max_steps}"
            )
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise InvalidArgumentError(
                f"{self.name}: timeout_s must be positive, not {self.timeout_s}"
            )
        if self.budget_usd is not None and self.budget_usd < 0:
            raise InvalidArgumentError(f"{self.name}: budget_usd must not be negative")
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "toolsets", tuple(self.toolsets))
        object.__setattr__(self, "branches", tuple(self.branches))
        if self.parent_tools is not None:
            if isinstance(self.parent_tools, str):
                raise InvalidTypeError(f"{self.name}: parent_tools must be a list of tool names")
            object.__setattr__(self, "parent_tools", tuple(self.parent_tools))
        check_unique_names(self.branches, owner=self.name)

    def with_(self, **changes: Any) -> SubAgent:
        """A copy with some settings changed (e.g. a new ``name`` to register it twice)."""
        return dataclasses.replace(self, **changes)

    @property
    def display_description(self) -> str:
        """The description shown in discovery: explicit, else the output model's docstring."""
        if self.description:
            return self.description
        doc = (self.final_output.__doc__ or "").strip() if self.final_output else ""
        return doc.splitlines()[0] if doc else f"Sub-agent {self.name}."


BranchDefinition = SubAgent
"""Alias: the seed speaks of branch definitions."""


def check_unique_names(definitions: Sequence[SubAgent], *, owner: str = "the agent") -> None:
    """Refuse two definitions registered under one name (a clear one-line error)."""
    seen: set[str] = set()
    for definition in definitions:
        if not isinstance(definition, SubAgent):
            raise InvalidTypeError(
                f"{owner}: branches must be SubAgent definitions, not {definition!r}"
            )
        if definition.name in seen:
            raise InvalidArgumentError(
                f"{owner}: two sub-agents are registered as {definition.name!r}"
            )
        seen.add(definition.name)


__all__ = [
    "DEFAULT_MAX_STEPS",
    "MERGE_MODES",
    "BranchDefinition",
    "MergeMode",
    "SubAgent",
    "check_unique_names",
]
