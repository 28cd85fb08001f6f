"""Looking at a fork without changing it: branch statuses, waiting for branches, costs,
each branch's file changes and the agent tool's small cross-branch diff.

A mixin of :class:`~branching_core.fork.coordinator.ForkCoordinator`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from branching_core.fork.model_run import budget_rule_text, history_estimated
from branching_core.fork.parts import CoordinatorParts
from branching_core.fork.types import BranchCost, BranchStatus, FileChange, ForkCostSummary


class Inspection(CoordinatorParts):
    """Statuses, waiting, costs and changes (mixin of ``ForkCoordinator``)."""

    def inspect_branches(self) -> list[BranchStatus]:
        return [rt.status() for rt in self._branches.values()]

    async def wait(
        self, timeout: float | None = None, branch_ids: Sequence[str] | None = None
    ) -> list[BranchStatus]:
        """Wait until the branches (all, or ``branch_ids``) are no longer running, or ``timeout``.

        Waits on the branch tasks themselves (no polling); returns the statuses either way.
        """
        selected = (
            [self.get_branch(k) for k in branch_ids]
            if branch_ids
            else list(self._branches.values())
        )
        me = asyncio.current_task()
        tasks = [
            rt.task
            for rt in selected
            if rt.task is not None and not rt.task.done() and rt.task is not me
        ]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        return self.inspect_branches()

    wait_branches = wait

    def fork_cost(self) -> ForkCostSummary:
        handle = self._require_handle()
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
                budget_rule=budget_rule_text(rt, self.default_model),
            )
            for rt in self._branches.values()
        ]
        known = [c.cumulative_usd for c in costs if c.cumulative_usd is not None]
        return ForkCostSummary(
            fork_id=handle.fork_id,
            branches=costs,
            aggregate_usd=sum(known) if known else None,
            aggregate_budget_usd=handle.aggregate_budget_usd,
        )

    def file_changes(self, key: str) -> list[FileChange]:
        """What a branch changed so far (tool writes and shell commands alike)."""
        rt = self.get_branch(key)
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

    def diff(self, paths: list[str] | None = None) -> dict[str, Any]:
        """The cross-branch diff report as plain data (``BranchDiffReport.to_dict()``, built
        by the review layer; see :meth:`diff_report`)."""
        return self.diff_report(paths).to_dict()
