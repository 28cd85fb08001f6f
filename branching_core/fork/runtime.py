"""The live state of a fork branch (:class:`BranchRuntime`) and the context a branch's
agent run sees (:func:`current_branch`).

Owned by the coordinator; tools, capabilities and front ends read it, never write it."""

from __future__ import annotations

import asyncio
import contextvars
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelMessage

from branching_core.fork import events as ev
from branching_core.fork.budget import UsageMeter
from branching_core.fork.history import trim_unanswered_tool_calls
from branching_core.fork.steering import SteeringQueue
from branching_core.fork.types import (
    SETTLED_STATES,
    BranchResolution,
    BranchSpec,
    BranchState,
    BranchStatus,
)
from branching_core.workspace import Workspace

if TYPE_CHECKING:
    from branching_core.fork.coordinator import ForkCoordinator


INTERRUPTED = "interrupted: the process running this branch exited"


@dataclass
class BranchRunContext:
    """What a branch's agent run knows about itself (set in the branch task's context)."""

    coordinator: ForkCoordinator
    runtime: BranchRuntime


_BRANCH_CTX: contextvars.ContextVar[BranchRunContext | None] = contextvars.ContextVar(
    "forkdeck_branch", default=None
)


def current_branch() -> BranchRunContext | None:
    """The branch the calling code runs in (``None`` in a parent run)."""
    return _BRANCH_CTX.get()


@dataclass(eq=False)
class BranchRuntime:
    """Live state of one branch (owned by its coordinator; read it, don't write it)."""

    branch_id: str
    label: str
    spec: BranchSpec
    index: int
    depth: int
    ws_branch: Any = None
    """The ``branching_core.workspace.Branch``; ``None`` once merged or discarded."""
    workspace_branch_id: str | None = None
    path: Path | None = None
    state: BranchState = "running"
    resolution: BranchResolution | None = None
    task: asyncio.Task[None] | None = None
    history: list[ModelMessage] = field(default_factory=list)
    """Latest snapshot of the branch's messages (partial while running or when stopped)."""
    seed_history: list[ModelMessage] = field(default_factory=list)
    meter: UsageMeter = field(default_factory=UsageMeter)
    queue: SteeringQueue = field(default_factory=SteeringQueue)
    error: str | None = None
    output: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    tool_calls: int = 0
    turns: int = 1
    child: ForkCoordinator | None = None
    pending_approvals: list[ev.ApprovalCall] = field(default_factory=list)
    """Tool calls waiting for :meth:`ForkCoordinator.approve` (state ``awaiting_approval``)."""
    save_error: str | None = None
    external: Any = None  # a running external agent's handle (fork/external_branch.py)
    user_commands: list[str] = field(default_factory=list)
    """``!cmd``s the user ran in this branch's directory (front ends append; the process
    report shows them among the model's requests)."""
    spend: Any = None  # the branch's SpendContext (model_run.branch_spend), for fork-wide caps
    """Why the latest save of this branch's state or history failed (logged too)."""
    finished_event: asyncio.Event | None = None
    """Set when the branch's current run ends (made anew by each run)."""

    @property
    def overlay(self) -> Any:
        """Seed-004 name for the branch's isolated file state (here: the workspace branch)."""
        return self.ws_branch

    @property
    def partial_history(self) -> list[ModelMessage]:
        return trim_unanswered_tool_calls(self.history)

    def status(self) -> BranchStatus:
        return BranchStatus(
            branch_id=self.branch_id,
            label=self.label,
            state=self.state,
            model=self.spec.model,
            depth=self.depth,
            workspace_branch_id=self.workspace_branch_id,
            path=str(self.path) if self.path is not None else None,
            cost_usd=self.meter.cumulative_usd,
            budget_usd=self.spec.budget_usd,
            requests=self.meter.requests,
            tool_calls=self.tool_calls,
            messages=len(self.history),
            error=self.error,
            output=self.output,
            resolution=self.resolution,
            started_at=self.started_at,
            finished_at=self.finished_at,
            save_error=self.save_error,
        )


def states_final(statuses: Sequence[BranchStatus]) -> bool:
    """True when no branch is running (paused-for-approval branches count as settled)."""
    return all(s.state in SETTLED_STATES for s in statuses)


def ws_name(label: str, fork_id: str, index: int) -> str:
    """The workspace branch name of a fork branch (label made safe, fork id for uniqueness)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip(".-")[:40] or "branch"
    return f"fork-{fork_id}-{index}-{safe}"


def as_workspace(workspace: Workspace | str | os.PathLike[str]) -> Workspace:
    return workspace if isinstance(workspace, Workspace) else Workspace(workspace)
