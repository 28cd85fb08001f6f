"""What every pattern returns: one ``SpeculationResult`` per candidate, in one outcome.

The field names and order follow BranchContext's, so code reading ``outcome.winner``
or ``r.branch_index`` keeps working; ``status`` and ``duration`` are added because a
bare ``success`` flag cannot tell a loser that was killed from one that failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from branching_core.errors import error_name

Status = Literal["committed", "aborted", "lost_race", "timed_out", "failed", "cancelled"]

COMMITTED: Status = "committed"
ABORTED: Status = "aborted"
LOST_RACE: Status = "lost_race"
TIMED_OUT: Status = "timed_out"
FAILED: Status = "failed"
CANCELLED: Status = "cancelled"
FINAL_STATUSES: tuple[Status, ...] = (COMMITTED, ABORTED, LOST_RACE, TIMED_OUT, FAILED, CANCELLED)


@dataclass
class SpeculationResult:
    """One candidate's fate.

    ``success`` is true only when the candidate ran to completion and reported
    success; a candidate killed by a winner, a timeout or Ctrl-C never is. ``status``
    says what happened to its branch: ``committed`` (it is in the workspace now),
    ``aborted`` (finished, not chosen), ``lost_race`` (a sibling committed first),
    ``timed_out`` (killed at its deadline), ``failed`` (returned failure, raised or
    crashed, or its cluster node died: ``exception`` says so) or ``cancelled`` (never
    started, or stopped by Ctrl-C). ``node_id`` is the Ray node it ran on, if any.
    """

    branch_index: int
    success: bool = False
    score: float = 0.0
    return_value: Any = None
    exception: BaseException | None = None
    branch_path: Path | None = None
    status: str = "pending"
    duration: float = 0.0
    name: str = ""
    depth: int = 0
    parent_index: int | None = None
    error_context: str | None = None
    node_id: str | None = None  # the cluster node it ran on (``None``: this machine)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (the CLI's per-candidate entry)."""
        out: dict[str, Any] = {
            "index": self.branch_index,
            "success": self.success,
            "score": self.score,
            "status": self.status,
            "duration": round(self.duration, 4),
        }
        if self.depth or self.parent_index is not None:
            out["depth"] = self.depth
            out["parent"] = self.parent_index
        if self.node_id is not None:
            out["node"] = self.node_id
        if self.exception is not None:
            out["error"] = f"{error_name(self.exception)}: {self.exception}"
        return out


@dataclass
class SpeculationOutcome:
    """The result of one pattern call; nothing it started is still running or open."""

    committed: bool = False
    winner: SpeculationResult | None = None
    all_results: list[SpeculationResult] = field(default_factory=list)
    duration: float = 0.0


__all__ = [
    "ABORTED",
    "CANCELLED",
    "COMMITTED",
    "FAILED",
    "FINAL_STATUSES",
    "LOST_RACE",
    "TIMED_OUT",
    "SpeculationOutcome",
    "SpeculationResult",
    "Status",
]
