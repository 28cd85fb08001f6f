"""forkdeck's engine: copy-on-write workspaces, sandboxed branches, exploration patterns
and live forking of pydantic-ai runs.

Every public name is importable from here, lazily: ``from branching_core import Workspace``
loads only the workspace layer, so a script that never forks an agent never pays for
importing pydantic-ai.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from branching_core._lazy import lazy_exports
from branching_core.errors import *  # noqa: F403  (the error classes are cheap and always wanted)
from branching_core.errors import __all__ as _error_names

if TYPE_CHECKING:  # the real types for pyright; at run time ``__getattr__`` loads them
    from branching_core.merge_action import GitCommitRequest as GitCommitRequest
    from branching_core.merge_action import MergeAction as MergeAction
    from branching_core.merge_action import MergeActionError as MergeActionError
    from branching_core.state_dir import STATE_DIR as STATE_DIR

_LAZY: dict[str, str] = {
    # workspace layer
    "Workspace": "branching_core.workspace",
    "Branch": "branching_core.workspace",
    "BranchChanges": "branching_core.workspace",
    "close_all_workspaces": "branching_core.workspace",
    # sandbox layer
    "BranchContext": "branching_core.sandbox",
    "ResourceLimits": "branching_core.sandbox",
    "SandboxedCommand": "branching_core.sandbox",
    "run_command": "branching_core.sandbox",
    # patterns
    "Speculate": "branching_core.patterns",
    "BestOfN": "branching_core.patterns",
    "Reflexion": "branching_core.patterns",
    "TreeOfThoughts": "branching_core.patterns",
    "BeamSearch": "branching_core.patterns",
    "Tournament": "branching_core.patterns",
    "Cascaded": "branching_core.patterns",
    "SpeculationOutcome": "branching_core.patterns",
    "SpeculationResult": "branching_core.patterns",
    "LocalRunner": "branching_core.patterns",
    "CommandCandidate": "branching_core.patterns",
    "CommandTask": "branching_core.patterns",
    # candidates on a Ray cluster (the ray extra; Ray is imported only by RayRunner())
    "RayRunner": "branching_core.cluster",
    # live forking of pydantic-ai runs
    "ForkCoordinator": "branching_core.fork",
    "LiveForkCapability": "branching_core.live",
    "BranchSpec": "branching_core.fork",
    "BranchState": "branching_core.fork",
    "BranchStatus": "branching_core.fork",
    "BranchIsolation": "branching_core.fork",
    "ForkHandle": "branching_core.fork",
    "ForkOptions": "branching_core.fork",
    "BranchApprovalRequested": "branching_core.fork",
    "MergeStrategy": "branching_core.fork",
    "MergeResult": "branching_core.fork",
    # the typed merge choice: a shared leaf, so naming it never loads the fork layer
    "MergeAction": "branching_core.merge_action",
    "MergeActionError": "branching_core.merge_action",
    "GitCommitRequest": "branching_core.merge_action",
    "ForkCostSummary": "branching_core.fork",
    "BranchCost": "branching_core.fork",
    "FileChange": "branching_core.fork",
    "ForkBranchLimitError": "branching_core.fork",
    "ForkDepthLimitError": "branching_core.fork",
    "list_open_forks": "branching_core.fork",
    # agent layer
    "create_workspace_toolset": "branching_core.agent",
    "resolve_model": "branching_core.agent",
    # sub-agent runs (seed 002), agent-facing
    "SubAgent": "branching_core.live.subagents",
    "BranchDefinition": "branching_core.live.subagents",
    "SubAgentBranches": "branching_core.live.subagents",
    "SubAgentRun": "branching_core.live.subagents",
    # reviewing a fork: diff report and merge judge
    "BranchChange": "branching_core.review",
    "BranchDiffReport": "branching_core.review",
    "DiffSummary": "branching_core.review",
    "JudgeAgent": "branching_core.review",
    "JudgeVerdict": "branching_core.review",
    "PathDiff": "branching_core.review",
    "ResolveOutcome": "branching_core.review",
    "build_diff_report": "branching_core.review",
    # where a workspace keeps forkdeck's state (``.pydantic-deep``), without loading a layer
    "STATE_DIR": "branching_core.state_dir",
    # settings
    "Settings": "branching_core.config",
    "load_settings": "branching_core.config",
}

# built from the lazy table so each name is declared once (pyright cannot follow that)
__all__ = sorted([*_error_names, *_LAZY])  # pyright: ignore[reportUnsupportedDunderAll]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
