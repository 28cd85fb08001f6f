"""The forking types (names and fields follow the forking API reference, seed 004).

Plain dataclasses and Literals: no pydantic-ai import, so a UI can import them cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from branching_core.errors import BranchingError
from branching_core.run_states import FORK_STOPPED_STATES, SHARED_FINAL_STATES

BranchState = Literal[
    "running",
    "done",
    "failed",
    "terminated",
    "budget_exhausted",
    "aggregate_budget_exhausted",
    "budget_unknown",
    "awaiting_approval",
]
"""Lifecycle of one branch. ``awaiting_approval`` is a pause: the branch's run ended on tool
calls that need a person's approval (:meth:`ForkCoordinator.approve` resumes it).
``budget_unknown``: the branch has a budget (or its fork an aggregate one) but a response
could not be priced (the ``price_fn`` failed), so the cap could not be checked and the
branch was stopped rather than run without one. Every other state but ``running`` is
final for the current turn; ``budget_exhausted`` / ``aggregate_budget_exhausted`` /
``budget_unknown`` / ``terminated`` branches stay mergeable (their partial history and
their files)."""

STOPPED_STATES: frozenset[str] = FORK_STOPPED_STATES
"""Branches stopped before they finished (mergeable: their partial work)."""

FINAL_STATES: frozenset[str] = SHARED_FINAL_STATES | STOPPED_STATES
"""The final states sub-agent runs share (``branching_core.run_states``), plus
``aggregate_budget_exhausted``."""

SETTLED_STATES: frozenset[str] = FINAL_STATES | {"awaiting_approval"}
"""States in which a branch does nothing until someone acts (``wait`` returns on these)."""

BranchResolution = Literal["merged", "discarded"]
MergeKind = Literal["manual", "auto", "auto_with_fallback", "vote"]
IsolationMode = Literal["copy", "share", "share_readonly", "isolated", "shared"]


class ForkBranchLimitError(BranchingError, ValueError):
    """A ``fork`` asked for more branches than ``max_branches``."""


class ForkDepthLimitError(BranchingError, RuntimeError):
    """A fork from inside a branch would nest deeper than ``max_depth``."""


@dataclass
class BranchSpec:
    """One branch of a fork.

    ``steer`` is the first user message the branch receives (what makes it differ from its
    siblings); an empty steer sends none, so the branch runs on from the parent history as
    given (ending in the user's request, that request is re-sampled: best-of-N); ``model``
    overrides the model for this branch (a name the coordinator's model
    resolver understands, e.g. ``anthropic:claude-sonnet-4-6`` or ``offline``);
    ``budget_usd`` caps this branch's spend; ``extra_instructions`` is appended to the
    branch's instructions.
    """

    label: str
    steer: str
    model: str | None = None
    budget_usd: float | None = None
    extra_instructions: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "steer": self.steer,
            "model": self.model,
            "budget_usd": self.budget_usd,
            "extra_instructions": self.extra_instructions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BranchSpec:
        return cls(
            label=str(data["label"]),
            steer=str(data.get("steer", "")),
            model=data.get("model"),
            budget_usd=data.get("budget_usd"),
            extra_instructions=data.get("extra_instructions"),
        )


@dataclass
class BranchIsolation:
    """What a branch shares with its parent.

    Enforced here: ``history`` is always copied; ``backend="copy"`` means the branch gets
    its own copy-on-write workspace branch; ``message_queue="isolated"`` means a steering
    queue of its own. The other flags are accepted and recorded for forward compatibility.
    """

    history: Literal["copy"] = "copy"
    backend: IsolationMode = "copy"
    memory: IsolationMode = "copy"
    todos: IsolationMode = "copy"
    message_queue: IsolationMode = "isolated"
    team_bus: IsolationMode = "shared"


@dataclass
class MergeStrategy:
    """How the fork is resolved. Only ``manual`` is implemented in this package: the judge
    (``auto``, ``auto_with_fallback``, ``vote``) belongs to ``branching_core.review``."""

    kind: MergeKind = "manual"
    judge_model: str | None = None
    confidence_threshold: float = 0.8


@dataclass
class BranchStatus:
    """A snapshot of one branch, as ``inspect_branches`` returns it."""

    branch_id: str
    label: str
    state: BranchState
    model: str | None = None
    depth: int = 1
    workspace_branch_id: str | None = None
    path: str | None = None
    cost_usd: float | None = 0.0
    budget_usd: float | None = None
    requests: int = 0
    tool_calls: int = 0
    messages: int = 0
    error: str | None = None
    output: str | None = None
    resolution: BranchResolution | None = None
    started_at: float | None = None
    finished_at: float | None = None
    save_error: str | None = None
    """Why the branch's latest state or history could not be saved to disk (``None``: it
    was, or is being, saved); the live state above is still right."""


@dataclass
class ForkHandle:
    """Identifies a live fork: returned by ``ForkCoordinator.fork``."""

    fork_id: str
    branches: list[str]
    labels: dict[str, str]
    depth: int = 1
    parent_checkpoint_id: str | None = None
    merge_strategy: MergeStrategy = field(default_factory=MergeStrategy)
    isolation: BranchIsolation = field(default_factory=BranchIsolation)
    aggregate_budget_usd: float | None = None
    parent_branch_id: str | None = None
    created_at: float = 0.0


@dataclass
class FileChange:
    """One change a branch made to a path (event-level record).

    ``op`` is ``write`` (created or modified) or ``delete``; derived from the branch's
    copy-on-write view, so changes made by shell commands count as well as tool writes.
    """

    path: str
    op: Literal["write", "edit", "delete"]
    timestamp: float = 0.0
    branch_id: str | None = None


@dataclass
class FlushError:
    """A path that could not be applied to the parent during a merge."""

    path: str
    error: str


@dataclass
class FlushReport:
    """What applying one branch onto its parent did."""

    applied_paths: list[str] = field(default_factory=list)
    applied_changes: int = 0
    deleted_paths: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    errors: list[FlushError] = field(default_factory=list)


@dataclass
class MergeResult:
    """Result of ``ForkCoordinator.merge_or_select``.

    ``applied_paths`` were written into the parent (created or modified), ``deleted_paths``
    removed from it, ``conflicts`` were changed in the parent after the fork *and* by the
    winner (left as the parent has them), ``errors`` failed to apply. ``history_after_merge``
    is the winner's conversation (partial for a stopped branch; unanswered tool calls
    trimmed) to adopt as the parent's history.
    """

    fork_id: str
    action: str
    winner_branch_id: str | None = None
    winner_label: str | None = None
    winner_state: BranchState | None = None
    applied_paths: list[str] = field(default_factory=list)
    applied_changes: int = 0
    deleted_paths: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    errors: list[FlushError] = field(default_factory=list)
    history_after_merge: list[Any] = field(default_factory=list)
    discarded_branch_ids: list[str] = field(default_factory=list)
    partial: bool = False
    pre_fork_checkpoint_id: str | None = None
    post_fork_checkpoint_id: str | None = None
    git_ref: str | None = None
    """``refs/heads/forkdeck/<fork>/<label>``: the commits made inside the winner, kept."""
    git_commit: str | None = None
    """The landing commit made of exactly the landed paths (``GitLanding(commit=True)``)."""
    git_notes: list[str] = field(default_factory=list)
    """One line per git outcome ("git: committed ...", "git: not committed: ...")."""

    @property
    def aborted(self) -> bool:
        return self.winner_branch_id is None


@dataclass
class BranchCost:
    """One branch's spend. ``cumulative_usd`` is ``None`` when the model has no known price."""

    branch_id: str
    label: str
    model: str | None
    cumulative_usd: float | None
    budget_usd: float | None
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_estimated: bool = False
    """True when a server sent no usage and some token counts are estimated from the text
    (show them as ``~N``, never as a reported 0)."""
    budget_rule: str | None = None
    """How the budget is enforced for this model: its listed price, the user's price, or a
    token cap (``BudgetRule.describe()``); None without a budget."""


@dataclass
class ForkCostSummary:
    """Per-branch and aggregate cost of a fork (``aggregate_usd`` sums the known costs)."""

    fork_id: str
    branches: list[BranchCost]
    aggregate_usd: float | None
    aggregate_budget_usd: float | None = None


__all__ = [
    "FINAL_STATES",
    "SETTLED_STATES",
    "STOPPED_STATES",
    "BranchCost",
    "BranchIsolation",
    "BranchResolution",
    "BranchSpec",
    "BranchState",
    "BranchStatus",
    "FileChange",
    "FlushError",
    "FlushReport",
    "ForkBranchLimitError",
    "ForkCostSummary",
    "ForkDepthLimitError",
    "ForkHandle",
    "MergeResult",
    "MergeStrategy",
]
