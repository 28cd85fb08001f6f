"""Live run forking for pydantic-ai agents.

``ForkCoordinator`` runs the branches of one fork (asyncio tasks driving ``agent.iter()``,
each with a copied history, its own copy-on-write workspace branch, steering queue, model
and budget) and merges the winner. Fork state is persisted under
``<workspace>/.pydantic-deep/forks/<fork_id>/`` and can be recovered after a restart.

``ForkCoordinator`` is the one coordinator (``branching_core.ForkCoordinator``): its diff
report, process report and judge are the review layer's, one layer below, imported on first
use. The agent-facing pieces (``LiveForkCapability``, the forking toolset) live one layer
up, in ``branching_core.live``.
"""

from __future__ import annotations

from branching_core.fork.actions import GitCommitRequest, MergeAction, MergeActionError
from branching_core.fork.budget import PriceFn, UsageMeter, default_price
from branching_core.fork.checkpoints import Checkpoint, CheckpointStore
from branching_core.fork.coordinator import (
    BranchRunContext,
    BranchRuntime,
    ForkCoordinator,
    current_branch,
    list_open_forks,
)
from branching_core.fork.events import (
    ApprovalCall,
    BranchApprovalRequested,
    BranchCostUpdated,
    BranchEditConflict,
    BranchEditRefused,
    BranchStateChanged,
    BranchSteered,
    BranchSteerUndelivered,
    BranchTextDelta,
    BranchToolCall,
    BranchToolResult,
    BranchUserEdited,
    ForkCreated,
    ForkEvent,
    ForkResolved,
)
from branching_core.fork.history import (
    copy_history,
    dump_history,
    load_history,
    trim_unanswered_tool_calls,
)
from branching_core.fork.options import ApprovalPolicy, ForkOptions
from branching_core.fork.steering import SteeringQueue
from branching_core.fork.store import ForkStore
from branching_core.fork.types import (
    BranchCost,
    BranchIsolation,
    BranchSpec,
    BranchState,
    BranchStatus,
    FileChange,
    FlushError,
    FlushReport,
    ForkBranchLimitError,
    ForkCostSummary,
    ForkDepthLimitError,
    ForkHandle,
    MergeResult,
    MergeStrategy,
)

__all__ = [
    "ApprovalCall",
    "ApprovalPolicy",
    "BranchApprovalRequested",
    "BranchCost",
    "BranchCostUpdated",
    "BranchEditConflict",
    "BranchEditRefused",
    "BranchIsolation",
    "BranchRunContext",
    "BranchRuntime",
    "BranchSpec",
    "BranchState",
    "BranchStateChanged",
    "BranchStatus",
    "BranchSteerUndelivered",
    "BranchSteered",
    "BranchTextDelta",
    "BranchToolCall",
    "BranchToolResult",
    "BranchUserEdited",
    "Checkpoint",
    "CheckpointStore",
    "FileChange",
    "FlushError",
    "FlushReport",
    "ForkBranchLimitError",
    "ForkCoordinator",
    "ForkCostSummary",
    "ForkCreated",
    "ForkDepthLimitError",
    "ForkEvent",
    "ForkHandle",
    "ForkOptions",
    "ForkResolved",
    "ForkStore",
    "GitCommitRequest",
    "MergeAction",
    "MergeActionError",
    "MergeResult",
    "MergeStrategy",
    "PriceFn",
    "SteeringQueue",
    "UsageMeter",
    "copy_history",
    "current_branch",
    "default_price",
    "dump_history",
    "list_open_forks",
    "load_history",
    "trim_unanswered_tool_calls",
]
