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

from typing import TYPE_CHECKING

from branching_core._lazy import lazy_exports
from branching_core.fork.actions import GitCommitRequest, MergeAction, MergeActionError
from branching_core.fork.branch_files import is_hosted_id  # no local !cmd in a cluster branch
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
    BranchEvent,
    BranchResponseRestarted,
    BranchResponseStarted,
    BranchStateChanged,
    BranchSteered,
    BranchSteerUndelivered,
    BranchTerminalOutput,
    BranchTextDelta,
    BranchToolCall,
    BranchToolResult,
    BranchUserEdited,
    ForkCreated,
    ForkEvent,
    ForkResolved,
)
from branching_core.fork.git_landing import GitLanding  # the merge picker's "and commit" line
from branching_core.fork.history import (
    copy_history,
    dump_history,
    load_history,
    trim_unanswered_tool_calls,
)
from branching_core.fork.model_run import model_label_for_budget  # a budget line's model
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

if TYPE_CHECKING:  # loaded on first use (``__getattr__``): a plain fork never needs them
    from branching_core.fork.combine import PARENT as PARENT
    from branching_core.fork.combine import CombineConflict as CombineConflict
    from branching_core.fork.combine import CombineError as CombineError
    from branching_core.fork.combine import Hunk as Hunk
    from branching_core.fork.combine import branch_hunks as branch_hunks
    from branching_core.fork.combine import hunks_of as hunks_of
    from branching_core.fork.estimate import BranchEstimate as BranchEstimate
    from branching_core.fork.estimate import ForkEstimate as ForkEstimate

_LAZY: dict[str, str] = {
    # combining several branches file by file or hunk by hunk (the TUI's diff explorer)
    "PARENT": "branching_core.fork.combine",
    "CombineConflict": "branching_core.fork.combine",
    "CombineError": "branching_core.fork.combine",
    "Hunk": "branching_core.fork.combine",
    "branch_hunks": "branching_core.fork.combine",
    "hunks_of": "branching_core.fork.combine",
    # what a fork will cost before it starts (the TUI's fork picker)
    "BranchEstimate": "branching_core.fork.estimate",
    "ForkEstimate": "branching_core.fork.estimate",
}

__all__ = [
    "PARENT",
    "ApprovalCall",
    "ApprovalPolicy",
    "BranchApprovalRequested",
    "BranchCost",
    "BranchCostUpdated",
    "BranchEditConflict",
    "BranchEditRefused",
    "BranchEstimate",
    "BranchEvent",
    "BranchIsolation",
    "BranchResponseRestarted",
    "BranchResponseStarted",
    "BranchRunContext",
    "BranchRuntime",
    "BranchSpec",
    "BranchState",
    "BranchStateChanged",
    "BranchStatus",
    "BranchSteerUndelivered",
    "BranchSteered",
    "BranchTerminalOutput",
    "BranchTextDelta",
    "BranchToolCall",
    "BranchToolResult",
    "BranchUserEdited",
    "Checkpoint",
    "CheckpointStore",
    "CombineConflict",
    "CombineError",
    "FileChange",
    "FlushError",
    "FlushReport",
    "ForkBranchLimitError",
    "ForkCoordinator",
    "ForkCostSummary",
    "ForkCreated",
    "ForkDepthLimitError",
    "ForkEstimate",
    "ForkEvent",
    "ForkHandle",
    "ForkOptions",
    "ForkResolved",
    "ForkStore",
    "GitCommitRequest",
    "GitLanding",
    "Hunk",
    "MergeAction",
    "MergeActionError",
    "MergeResult",
    "MergeStrategy",
    "PriceFn",
    "SteeringQueue",
    "UsageMeter",
    "branch_hunks",
    "copy_history",
    "current_branch",
    "default_price",
    "dump_history",
    "hunks_of",
    "is_hosted_id",
    "list_open_forks",
    "load_history",
    "model_label_for_budget",
    "trim_unanswered_tool_calls",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
