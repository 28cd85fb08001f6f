"""Tool approvals in fork branches: which tool calls need one, pausing a branch on them
(state ``awaiting_approval``) and resuming it with the user's answers.

Owned by :class:`~branching_core.fork.coordinator.ForkCoordinator` (``ApprovalBroker``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.tools import DeferredToolApprovalResult

from branching_core.errors import InvalidArgumentError, InvalidStateError
from branching_core.fork import events as ev
from branching_core.fork.options import ApprovalPolicy
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


class ApprovalBroker:
    """Pauses branches on tool calls that need an approval and turns the user's answers
    into the results a resumed run takes. It changes branch states through ``set_state``
    and announces requests through ``publish``; the run loop resumes the branch."""

    def __init__(
        self,
        set_state: Callable[..., None],
        publish: Callable[[ev.ForkEvent], None],
    ) -> None:
        self._set_state = set_state
        self._publish = publish

    def pause(self, fork_id: str, rt: BranchRuntime, requests: DeferredToolRequests) -> None:
        """A run ended on deferred tool calls: wait for approvals (or fail the branch for
        calls meant to run outside the agent, which a branch cannot do)."""
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
                fork_id=fork_id,
                branch_id=rt.branch_id,
                label=rt.label,
                calls=tuple(calls),
            )
        )

    @staticmethod
    def answers(rt: BranchRuntime, decisions: dict[str, bool | str]) -> DeferredToolResults:
        """The results that resume ``rt`` (see ``ForkCoordinator.approve``): calls left
        out are denied, a branch never runs a tool nobody approved."""
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
        return DeferredToolResults(approvals=answers)
