"""Tool approvals in fork branches: which tool calls need one, pausing a branch on them
(state ``awaiting_approval``) and resuming it with the user's answers.

A mixin of :class:`~branching_core.fork.coordinator.ForkCoordinator`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.tools import DeferredToolApprovalResult

from branching_core.errors import InvalidArgumentError, InvalidStateError
from branching_core.fork import events as ev
from branching_core.fork.options import ApprovalPolicy
from branching_core.fork.parts import CoordinatorParts
from branching_core.fork.runtime import (
    BranchRuntime,
)


def approval_predicate(
    policy: ApprovalPolicy | None,
) -> Callable[[str, dict[str, Any]], bool] | None:
    if policy is None or policy is False:
        return None
    if policy is True:
        return lambda _name, _args: True
    if callable(policy):
        return policy
    names = frozenset(policy)
    return lambda name, _args: name in names


def with_deferred_output(output_type: Any) -> list[Any]:
    """The agent's output type plus ``DeferredToolRequests``, so a branch run that hits a
    tool needing approval ends with the pending calls instead of raising."""
    base = list(output_type) if isinstance(output_type, list | tuple) else [output_type]
    return base if DeferredToolRequests in base else [*base, DeferredToolRequests]


class Approvals(CoordinatorParts):
    """Pausing on and answering tool approvals (mixin of ``ForkCoordinator``)."""

    def _await_approval(self, rt: BranchRuntime, requests: DeferredToolRequests) -> None:
        if requests.calls:
            names = ", ".join(sorted({c.tool_name for c in requests.calls}))
            rt.error = f"tools run outside the agent are not supported in a branch: {names}"
            if rt.state == "running":
                self._set_state(rt, "failed", persist=False)
            return
        calls = [
            ev.ApprovalCall(tool_call_id=c.tool_call_id, tool_name=c.tool_name, args=c.args)
            for c in requests.approvals
        ]
        rt.pending_approvals = calls
        if rt.state != "running":
            return
        self._set_state(rt, "awaiting_approval", persist=False)
        self._publish(
            ev.BranchApprovalRequested(
                fork_id=self.fork_id or "",
                branch_id=rt.branch_id,
                label=rt.label,
                calls=tuple(calls),
            )
        )

    def pending_approvals(self, key: str) -> list[ev.ApprovalCall]:
        """The tool calls the branch with this label or id waits on (empty if none)."""
        return list(self.get_branch(key).pending_approvals)

    async def approve(self, key: str, decisions: dict[str, bool | str]) -> asyncio.Task[None]:
        """Answer a paused branch's pending tool calls and resume it.

        ``decisions`` maps each pending ``tool_call_id`` to True (run it), False (deny), or a
        string (deny, with that message for the model). Calls left out are denied: a branch
        never runs a tool nobody approved.
        """
        rt = self.get_branch(key)
        if rt.state != "awaiting_approval" or not rt.pending_approvals:
            raise InvalidStateError(f"branch {rt.label} is {rt.state}; it waits on no approval")
        unknown = set(decisions) - {c.tool_call_id for c in rt.pending_approvals}
        if unknown:
            raise InvalidArgumentError(f"no pending tool call with id {sorted(unknown)[0]!r}")
        answers: dict[str, bool | DeferredToolApprovalResult] = {}
        for call in rt.pending_approvals:
            answer = decisions.get(call.tool_call_id, False)
            if answer is True:
                answers[call.tool_call_id] = True
            else:
                reason = answer if isinstance(answer, str) else "The user denied this tool call."
                answers[call.tool_call_id] = ToolDenied(reason)
        return self._start(rt, None, list(rt.history), DeferredToolResults(approvals=answers))
