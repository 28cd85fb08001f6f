"""Looking at a fork without changing it: branch statuses, waiting for branches, costs,
each branch's file changes and the agent tool's small cross-branch diff.

Functions of a fork's branches; ``ForkCoordinator`` exposes them as methods."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from typing import Any

from branching_core.fork.model_run import budget_rule_text, history_estimated
from branching_core.fork.runtime import BranchRuntime
from branching_core.fork.types import BranchCost, FileChange, ForkCostSummary, ForkHandle


async def wait_for(selected: Sequence[BranchRuntime], timeout: float | None = None) -> None:
    """Wait until the ``selected`` branches are no longer running, or ``timeout``: on the
    branch tasks themselves (no polling), never on the calling task."""
    me = asyncio.current_task()
    tasks = [
        rt.task
        for rt in selected
        if rt.task is not None and not rt.task.done() and rt.task is not me
    ]
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)


def fork_cost(
    handle: ForkHandle, branches: Iterable[BranchRuntime], default_model: Any
) -> ForkCostSummary:
    """Each branch's spend and budget, and the fork's total."""
    costs = [
        BranchCost(
            branch_id=rt.branch_id,
            label=rt.label,
            model=rt.spec.model,
            cumulative_usd=rt.meter.cumulative_usd,
            budget_usd=rt.spec.budget_usd,
            requests=rt.meter.requests,
            input_tokens=rt.meter.input_tokens,
            output_tokens=rt.meter.output_tokens,
            tokens_estimated=history_estimated(rt.history),
            budget_rule=budget_rule_text(rt, default_model),
        )
        for rt in branches
    ]
    known = [c.cumulative_usd for c in costs if c.cumulative_usd is not None]
    return ForkCostSummary(
        fork_id=handle.fork_id,
        branches=costs,
        aggregate_usd=sum(known) if known else None,
        aggregate_budget_usd=handle.aggregate_budget_usd,
    )


def file_changes(rt: BranchRuntime) -> list[FileChange]:
    """What a branch changed so far (tool writes and shell commands alike)."""
    if rt.ws_branch is None:
        return []
    changes = rt.ws_branch.changes()
    now = time.time()
    out = [
        FileChange(p, "write", now, rt.branch_id)
        for p in sorted({*changes.created, *changes.modified})
    ]
    out += [FileChange(p, "delete", now, rt.branch_id) for p in changes.deleted]
    return out


__all__ = ["file_changes", "fork_cost", "wait_for"]
