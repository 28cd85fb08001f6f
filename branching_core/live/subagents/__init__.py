"""Sub-agent branches (seed 002, Acorn's ``branches``) for pydantic-ai agents.

A parent agent registers :class:`SubAgent` definitions with :class:`SubAgentBranches` and
gets a ``branch`` tool; each sub-agent inherits the conversation, does one focused job with
its own model and tools in its own copy-on-write workspace branch, and returns a typed
result. Unlike Acorn: files are isolated (landed in the parent only on success), runs have
a timeout, can be cancelled and have a budget, every run is kept (:class:`SubAgentRun`),
definitions are instances (one definition can be registered twice with other settings),
and a failure keeps its cause.
"""

from __future__ import annotations

from branching_core.live.subagents.definition import (
    BranchDefinition,
    MergeMode,
    SubAgent,
)
from branching_core.live.subagents.history import BRANCH_RESULT_PREFIX
from branching_core.live.subagents.registry import (
    SubAgentBranches,
    branch,
    current_registry,
)
from branching_core.live.subagents.tools import (
    BRANCH_TOOL,
    CALL_PARENT_TOOL,
    FINISH_TOOL,
    BranchToolset,
    ParentToolset,
)
from branching_core.live.subagents.transcript import (
    RunState,
    SubAgentEvent,
    SubAgentFinished,
    SubAgentProgress,
    SubAgentRun,
    SubAgentStarted,
    SubAgentToolResult,
    render_transcript,
)

__all__ = [
    "BRANCH_RESULT_PREFIX",
    "BRANCH_TOOL",
    "CALL_PARENT_TOOL",
    "FINISH_TOOL",
    "BranchDefinition",
    "BranchToolset",
    "MergeMode",
    "ParentToolset",
    "RunState",
    "SubAgent",
    "SubAgentBranches",
    "SubAgentEvent",
    "SubAgentFinished",
    "SubAgentProgress",
    "SubAgentRun",
    "SubAgentStarted",
    "SubAgentToolResult",
    "branch",
    "current_registry",
    "render_transcript",
]
