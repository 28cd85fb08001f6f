"""Events a coordinator publishes, for any front end (the coordinator knows no UI).

Subscribe with ``coordinator.subscribe()`` (an ``asyncio.Queue`` per subscriber) or
``coordinator.add_listener(callback)`` (called synchronously, on the event loop thread).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from branching_core.fork.types import BranchState


@dataclass(frozen=True)
class ForkEvent:
    fork_id: str


@dataclass(frozen=True)
class BranchEvent(ForkEvent):
    """An event about one branch of the fork (every ``Branch*`` event)."""

    branch_id: str = ""
    label: str = ""


@dataclass(frozen=True)
class ForkCreated(ForkEvent):
    branch_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class BranchStateChanged(BranchEvent):
    state: BranchState = "running"
    error: str | None = None


@dataclass(frozen=True)
class BranchTextDelta(BranchEvent):
    text: str = ""


@dataclass(frozen=True)
class BranchTerminalOutput(BranchEvent):
    """One line an external agent wrote to its terminal (ANSI colours kept)."""

    text: str = ""


@dataclass(frozen=True)
class BranchToolCall(BranchEvent):
    tool_name: str = ""
    args: Any = None
    tool_call_id: str = ""


@dataclass(frozen=True)
class BranchToolResult(BranchEvent):
    tool_name: str = ""
    content: str = ""
    tool_call_id: str = ""


@dataclass(frozen=True)
class BranchSteered(BranchEvent):
    message: str = ""


@dataclass(frozen=True)
class BranchSteerUndelivered(BranchEvent):
    """Steering messages no request of the branch carried, and that cannot be sent now (the
    branch failed or was stopped, or its fork is being resolved). A front end that showed
    them as sent must say they were not."""

    messages: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class BranchUserEdited(BranchEvent):
    """The user edited files in the branch's mirror directory (an IDE open on
    ``.pydantic-deep/forks/<id>/branches/<label>/``): they are in the branch's workspace
    now, and its model gets ``note`` at its next request."""

    paths: tuple[str, ...] = ()
    summaries: tuple[str, ...] = ()
    """One line per path: ``x.py (modified, +3 -1)``."""
    note: str = ""


@dataclass(frozen=True)
class BranchEditConflict(BranchEvent):
    """A path the user edited in the mirror that the branch had changed too since the last
    sync. Nothing was overwritten: the branch keeps its version, the user's is kept at
    ``kept_as`` (``None`` when the user's edit was a deletion)."""

    path: str = ""
    kept_as: str | None = None


@dataclass(frozen=True)
class BranchEditRefused(BranchEvent):
    """A user's change in the mirror that is not applied (a symlink, a path through one)."""

    path: str = ""
    reason: str = ""


@dataclass(frozen=True)
class BranchCostUpdated(BranchEvent):
    cumulative_usd: float | None = None


@dataclass(frozen=True)
class ApprovalCall:
    """One tool call a branch made that waits for a person's yes or no."""

    tool_call_id: str
    tool_name: str
    args: Any = None


@dataclass(frozen=True)
class BranchApprovalRequested(BranchEvent):
    calls: tuple[ApprovalCall, ...] = ()


@dataclass(frozen=True)
class ForkResolved(ForkEvent):
    action: str = ""
    winner_branch_id: str | None = None
    discarded: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class BranchResponseStarted(BranchEvent):
    """A branch sent a model request; the text that follows is a new response.

    A front end ends the current text block here (consecutive responses are never glued) and
    draws ``prompts`` (the user/steer messages this request carries, in order) at this point:
    a steer appears where the model read it, not where it was typed.
    """

    request: int = 0
    prompts: tuple[str, ...] = ()


@dataclass(frozen=True)
class BranchResponseRestarted(BranchEvent):
    """The server cut the response and it is being asked again: drop the partial text."""


__all__ = [
    "ApprovalCall",
    "BranchApprovalRequested",
    "BranchCostUpdated",
    "BranchEditConflict",
    "BranchEditRefused",
    "BranchEvent",
    "BranchResponseRestarted",
    "BranchResponseStarted",
    "BranchStateChanged",
    "BranchSteered",
    "BranchTextDelta",
    "BranchToolCall",
    "BranchToolResult",
    "BranchUserEdited",
    "ForkCreated",
    "ForkEvent",
    "ForkResolved",
]
