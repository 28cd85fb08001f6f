"""The agent-facing forking tools.

``fork_run``, ``inspect_branches``, ``wait_branches``, ``merge_or_select``,
``terminate_branch``, ``diff_branches`` and ``fork_cost``. ``delete_file`` (seed 003's
seventh tool) comes from the workspace toolset, bound to the run's own directory: in a
branch it deletes in the branch's copy-on-write view and the deletion is applied on merge.

A call that cannot be done raises ``ToolFailed``: the model reads the reason and adapts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai import RunContext, ToolFailed
from pydantic_ai.toolsets import FunctionToolset

from branching_core.fork.actions import GitCommitRequest, MergeAction
from branching_core.fork.types import (
    BranchIsolation,
    BranchSpec,
    BranchStatus,
    ForkBranchLimitError,
    ForkDepthLimitError,
    IsolationMode,
    MergeStrategy,
)

FORK_INSTRUCTIONS = (
    "You can explore several approaches in parallel: fork_run starts branches that each "
    "continue this conversation in their own copy of the workspace. Then call wait_branches "
    "(it blocks until they finish or the timeout passes; do not poll inspect_branches in a "
    "loop), compare them (inspect_branches, diff_branches, fork_cost), and resolve the fork "
    "with merge_or_select('pick:<label>') to keep one branch's files, or "
    "merge_or_select('abort') to keep none. Resolve every fork before you finish."
)


class BranchSpecArg(BaseModel):
    """One branch to start."""

    label: str = Field(description="Short unique name for the branch, e.g. 'a' or 'fast-path'.")
    steer: str = Field(description="The instruction this branch follows (what makes it differ).")
    model: str | None = Field(default=None, description="Optional model for this branch.")
    budget_usd: float | None = Field(default=None, description="Optional spending cap in USD.")
    extra_instructions: str | None = Field(default=None, description="Optional extra instructions.")


class IsolationArg(BaseModel):
    """``BranchIsolation`` overrides as the model may send them.

    Why a model of its own: the Literal values reach the tool's JSON schema, and a bad value
    is a validation error the model is asked to retry, not a ``str`` passed on unchecked.
    """

    model_config = ConfigDict(extra="forbid")

    history: Literal["copy"] = "copy"
    backend: IsolationMode = "copy"
    memory: IsolationMode = "copy"
    todos: IsolationMode = "copy"
    message_queue: IsolationMode = "isolated"
    team_bus: IsolationMode = "shared"

    def to_isolation(self) -> BranchIsolation:
        return BranchIsolation(**self.model_dump(exclude_unset=True))


def _status_dict(status: BranchStatus) -> dict[str, Any]:
    data = {
        "branch_id": status.branch_id,
        "label": status.label,
        "state": status.state,
        "cost_usd": status.cost_usd,
        "requests": status.requests,
        "tool_calls": status.tool_calls,
    }
    if status.model:
        data["model"] = status.model
    if status.error:
        data["error"] = status.error
    if status.output is not None:
        data["output"] = status.output[:2000]
    if status.resolution:
        data["resolution"] = status.resolution
    return data


def create_fork_toolset(
    get_coordinator: Callable[[], Any],
    *,
    id: str = "forkdeck-forking",
    wait_timeout_cap: float = 600.0,
) -> FunctionToolset[Any]:
    """Build the forking toolset; ``get_coordinator()`` returns the run's ``ForkCoordinator``."""
    toolset: FunctionToolset[Any] = FunctionToolset(id=id, instructions=FORK_INSTRUCTIONS)

    def coordinator() -> Any:
        coord = get_coordinator()
        if coord is None:
            raise ToolFailed("forking is not available in this run")
        return coord

    def active(fork_id: str | None = None) -> Any:
        coord = coordinator()
        if coord.fork_id is None:
            raise ToolFailed("there is no fork yet: call fork_run first")
        if fork_id and fork_id != coord.fork_id:
            raise ToolFailed(f"unknown fork_id {fork_id!r}; the active fork is {coord.fork_id}")
        return coord

    @toolset.tool(sequential=True)
    async def fork_run(
        ctx: RunContext[Any],
        specs: list[BranchSpecArg],
        aggregate_budget_usd: float | None = None,
        isolation: IsolationArg | None = None,
        strategy: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Fork this run into parallel branches, each going on from here in its own workspace copy.

        Args:
            specs: One entry per branch: label, steer; optional model, budget_usd,
                extra_instructions.
            aggregate_budget_usd: Optional cap on the total spend of all branches together.
            isolation: Optional BranchIsolation overrides.
            strategy: Optional MergeStrategy (only kind='manual' is resolved by this toolset).
        """
        coord = coordinator()
        try:
            handle = await coord.fork(
                [BranchSpec(**s.model_dump()) for s in specs],
                parent_history=list(ctx.messages),
                isolation=isolation.to_isolation() if isolation is not None else None,
                strategy=MergeStrategy(**strategy) if strategy else None,
                aggregate_budget_usd=aggregate_budget_usd,
            )
        except (
            ValueError,
            RuntimeError,
            TypeError,
            ForkBranchLimitError,
            ForkDepthLimitError,
        ) as exc:
            raise ToolFailed(str(exc)) from None
        return {
            "fork_id": handle.fork_id,
            "branches": [{"branch_id": b, "label": handle.labels[b]} for b in handle.branches],
            "next": "call wait_branches, then merge_or_select('pick:<label>') "
            "or merge_or_select('abort')",
        }

    @toolset.tool_plain
    def inspect_branches() -> list[dict[str, Any]]:
        """Current state of every branch.

        States: running, done, failed, terminated, budget_exhausted, aggregate_budget_exhausted,
        budget_unknown (a response could not be priced, so its budget could not be checked),
        awaiting_approval.
        """
        return [_status_dict(s) for s in active().inspect_branches()]

    @toolset.tool_plain(sequential=True)
    async def wait_branches(timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait until every branch has stopped, or until timeout seconds pass; returns their states.

        Args:
            timeout: Seconds to wait at most.
        """
        coord = active()
        statuses = await coord.wait(timeout=max(0.0, min(float(timeout), wait_timeout_cap)))
        return [_status_dict(s) for s in statuses]

    @toolset.tool_plain(sequential=True)
    async def merge_or_select(
        action: str, git_commit: bool = False, git_message: str | None = None
    ) -> dict[str, Any]:
        """Resolve the fork: 'pick:<label or id>' keeps that branch's files; 'auto' lets the
        judge pick one; 'abort' keeps none.

        Args:
            action: 'pick:<label or branch_id>', 'auto' or 'abort'.
            git_commit: after landing, commit exactly the landed files in git (the user's
                other changes stay as they are); default: the [git] commit_merges setting.
            git_message: the commit message (default: a summary of the branch's steer).
        """
        coord = active()
        try:  # the one parse of the model's string; the coordinator gets a typed action
            merge = MergeAction.parse(action)
            if git_commit:
                merge = replace(merge, git_commit=GitCommitRequest(message=git_message))
            result = await coord.merge_or_select(merge)
        except (ValueError, RuntimeError) as exc:
            raise ToolFailed(str(exc)) from None
        if result.aborted:
            return {"aborted": True, "discarded": result.discarded_branch_ids}
        out: dict[str, Any] = {
            "merged": result.winner_label,
            "branch_id": result.winner_branch_id,
            "state": result.winner_state,
            "applied_paths": result.applied_paths,
            "deleted_paths": result.deleted_paths,
            "conflicts": result.conflicts,
            "errors": [asdict(e) for e in result.errors],
        }
        if result.git_notes:  # issue 25: kept commits, the landing commit, or why not
            out["git"] = result.git_notes
        status = next(
            (s for s in coord.inspect_branches() if s.branch_id == result.winner_branch_id), None
        )
        if status is not None and status.output:
            out["branch_output"] = status.output[:4000]
        return out

    @toolset.tool_plain(sequential=True)
    async def terminate_branch(branch_id: str) -> dict[str, Any]:
        """Stop one running branch (it becomes 'terminated'; its work so far stays mergeable).

        Args:
            branch_id: The branch's id or label.
        """
        coord = active()
        try:
            return _status_dict(await coord.terminate_branch(coord.get_branch(branch_id).branch_id))
        except ValueError as exc:
            raise ToolFailed(str(exc)) from None

    @toolset.tool_plain
    def diff_branches(fork_id: str | None = None, paths: list[str] | None = None) -> dict[str, Any]:
        """Compare what each branch changed in the workspace, with unified diffs per path.

        Args:
            fork_id: The fork to compare (defaults to the active fork).
            paths: Optional list of paths to restrict the report to.
        """
        coord = active(fork_id)
        try:  # the review layer's report: the same one the TUI and the judge read
            return coord.diff_report(paths).to_dict()
        except (ValueError, RuntimeError) as exc:  # a bad path filter; no fork
            raise ToolFailed(str(exc)) from None

    @toolset.tool_plain
    def fork_cost(fork_id: str | None = None) -> dict[str, Any]:
        """Spend so far per branch and in total, in USD (None where the price is unknown).

        Args:
            fork_id: The fork (defaults to the active fork).
        """
        return asdict(active(fork_id).fork_cost())

    return toolset


__all__ = ["FORK_INSTRUCTIONS", "BranchSpecArg", "create_fork_toolset"]
