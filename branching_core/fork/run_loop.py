"""How one fork branch runs: ``agent.iter()`` with the branch's history, model, tools and
steering queue; every model response priced and checked against the budgets before its
tool calls run; events published as the run goes.

:class:`BranchRunner` is held by :class:`~branching_core.fork.coordinator.ForkCoordinator`;
it works on the fork's :class:`~branching_core.fork.state.ForkState`, saves through the
:class:`~branching_core.fork.persistence.ForkRecorder` and reads the run's settings
(agent, options, tools) from the coordinator's public surface."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart

from branching_core.agent.model_errors import describe_error
from branching_core.agent.spend import SPEND
from branching_core.agent.stream import ToolCalled, ToolReturned, stream_text, translate
from branching_core.errors import InvalidStateError
from branching_core.fork import events as ev
from branching_core.fork.approvals import ApprovalBroker, with_deferred_output
from branching_core.fork.external_branch import (
    external_prompt,
    is_external,
    run_external_branch,
)
from branching_core.fork.model_run import (
    aggregate_spend_reason,
    branch_spend,
    response_started,
    spend_reason_after,
)
from branching_core.fork.runtime import (
    _BRANCH_CTX,
    BranchRunContext,
    BranchRuntime,
)
from branching_core.fork.types import (
    BranchState,
)

log = logging.getLogger(__name__)


if TYPE_CHECKING:
    from branching_core.fork.coordinator import ForkCoordinator
    from branching_core.fork.persistence import ForkRecorder
    from branching_core.fork.state import ForkState


class BranchRunner:
    """Starting, running and budget-checking the branches of one coordinator's fork."""

    def __init__(
        self,
        coordinator: ForkCoordinator,
        state: ForkState,
        recorder: ForkRecorder,
        publish: Callable[[ev.ForkEvent], None],
    ) -> None:
        self.fc = coordinator
        self.state = state
        self.recorder = recorder
        self.publish = publish
        self.approvals = ApprovalBroker(self.set_state, publish)

    @property
    def fork_id(self) -> str | None:
        return self.state.fork_id

    def start(
        self,
        rt: BranchRuntime,
        prompt: str | None,
        history: list[ModelMessage],
        deferred: DeferredToolResults | None = None,
    ) -> asyncio.Task[None]:
        rt.state = "running"
        rt.error = None
        rt.pending_approvals = []
        rt.started_at = time.time()
        rt.finished_at = None
        rt.finished_event = asyncio.Event()
        if is_external(rt.spec.model):  # an external CLI agent (fork/external_branch.py)
            work: Any = run_external_branch(self, rt, external_prompt(prompt, history))
        else:
            work = self._run_branch(rt, prompt, history, deferred)
        rt.task = asyncio.create_task(work, name=f"fork-{self.fork_id}-{rt.label}")
        self.publish(
            ev.BranchStateChanged(
                fork_id=self.fork_id or "", branch_id=rt.branch_id, label=rt.label, state="running"
            )
        )
        return rt.task

    def model_for(self, rt: BranchRuntime) -> Any:
        """The model a branch runs with: its spec's model, else the parent run's."""
        if rt.spec.model:
            if self.fc.model_resolver is not None:
                return self.fc.model_resolver(rt.spec.model)
            from branching_core.fork.model_run import resolve_branch_model

            return resolve_branch_model(rt.spec.model, self.fc.default_model)
        return self.fc.default_model

    def _run_kwargs(self, rt: BranchRuntime, history: list[ModelMessage]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"message_history": history}
        fc = self.fc
        deps = fc.deps_factory(fc.parent_deps, rt) if fc.deps_factory else fc.parent_deps
        if deps is not None:
            kwargs["deps"] = deps
        model = self.model_for(rt)
        if model is not None:
            kwargs["model"] = model
        if rt.spec.extra_instructions:
            kwargs["instructions"] = rt.spec.extra_instructions
        if self.fc.provide_workspace_tools:
            if rt.path is None or rt.ws_branch is None:
                # a recovered branch whose workspace branch was lost: it has nothing to edit
                raise InvalidStateError(f"branch {rt.label} has no workspace (lost on recovery)")

            toolset: Any = self.fc.branch_files.toolset(rt.ws_branch)
            if self.fc.approval_required is not None:
                needs = self.fc.approval_required
                toolset = toolset.approval_required(
                    lambda _ctx, tool_def, args: needs(tool_def.name, args)
                )
            kwargs["toolsets"] = [toolset]
        kwargs["output_type"] = with_deferred_output(self.fc.agent.output_type)
        if self.fc.usage_limits is not None:
            kwargs["usage_limits"] = self.fc.usage_limits
        return kwargs

    async def _run_branch(
        self,
        rt: BranchRuntime,
        prompt: str | None,
        history: list[ModelMessage],
        deferred: DeferredToolResults | None = None,
    ) -> None:
        token = _BRANCH_CTX.set(BranchRunContext(self.fc, rt))
        run: Any = None
        fid = self.fork_id or ""
        kwargs: dict[str, Any] = {}
        try:
            # Inside the try: a model that cannot be resolved fails the branch with the reason.
            kwargs = self._run_kwargs(rt, history)
            if deferred is not None:
                kwargs["deferred_tool_results"] = deferred
            SPEND.set(
                branch_spend(
                    rt,
                    kwargs.get("model") or self.fc.agent.model,
                    self._cut,
                    self.publish,
                    fid,
                    fork_check=self._fork_spend_check,
                )
            )
            async with self.fc.agent.iter(prompt, **kwargs) as run:
                rt.queue.attach(run)
                async for node in run:
                    rt.history = list(run.all_messages())
                    if Agent.is_call_tools_node(node):
                        response: ModelResponse = node.model_response
                        stop = self._account(rt, response)
                        for part in response.parts:
                            streamed = self.fc.stream_text
                            if isinstance(part, TextPart) and part.content and not streamed:
                                self.publish(
                                    ev.BranchTextDelta(
                                        fork_id=fid,
                                        branch_id=rt.branch_id,
                                        label=rt.label,
                                        text=part.content,
                                    )
                                )
                        self.recorder.save_history(self.fork_id, rt)
                        if stop:
                            return
                        async with node.stream(run.ctx) as stream:
                            async for event in stream:
                                self._on_tool_event(rt, event)
                    elif self.fc.stream_text and Agent.is_model_request_node(node):
                        self.publish(response_started(fid, rt, node))
                        async with node.stream(run.ctx) as stream:
                            async for event in stream:
                                self._on_stream_event(rt, event)
                result = run.result
            assert result is not None
            rt.history = list(result.all_messages())
            if isinstance(result.output, DeferredToolRequests):
                self.approvals.pause(fid, rt, result.output)
            else:
                rt.output = result.output if isinstance(result.output, str) else repr(result.output)
                if rt.state == "running":
                    self.set_state(rt, "done", persist=False)
        except asyncio.CancelledError:
            if run is not None:
                rt.history = list(run.all_messages())
            if rt.state == "running":
                self.set_state(rt, "terminated", persist=False)
        except Exception as exc:
            if run is not None:
                rt.history = list(run.all_messages())
            rt.error = describe_error(exc, kwargs.get("model"), rt.history)
            if rt.state == "running":
                self.set_state(rt, "failed", persist=False)
        finally:
            left = rt.queue.detach(rt.history)  # steers no request carried
            _BRANCH_CTX.reset(token)
            rt.finished_at = time.time()
            # each save on its own: one failing never skips the other
            self.recorder.save_history(self.fork_id, rt)
            self.recorder.persist_or_report(rt)
            if rt.finished_event is not None:
                rt.finished_event.set()
            if left and rt.state != "awaiting_approval":  # (a resumed run gets them at once)
                asyncio.get_running_loop().call_soon(self._deliver_left_steers, rt)

    def _deliver_left_steers(self, rt: BranchRuntime) -> None:
        """Send the steers a finished run never carried as the branch's next turn, or, when
        the branch cannot go on, report them undelivered (:class:`BranchSteerUndelivered`)."""
        if rt.task is not None and not rt.task.done():
            return  # a new run started meanwhile: it was handed them when it attached
        messages = rt.queue.take_held()
        if not messages:
            return
        if rt.state == "done" and rt.ws_branch is not None and not self.state.lock.locked():
            rt.turns += 1
            history = rt.partial_history or list(rt.seed_history)
            self.start(rt, "\n\n".join(messages), history)
            rt.queue.delivered.extend(messages)
            return
        reason = (
            "the fork is being resolved"
            if self.state.lock.locked() or rt.ws_branch is None
            else f"the branch is {rt.state}"
        )
        log.warning("steer to %s not delivered: %s", rt.label, reason)
        self.publish(
            ev.BranchSteerUndelivered(
                fork_id=self.fork_id or "",
                branch_id=rt.branch_id,
                label=rt.label,
                messages=tuple(messages),
                reason=reason,
            )
        )

    def _on_tool_event(self, rt: BranchRuntime, event: object) -> None:
        item = translate(event)
        fid = self.fork_id or ""
        if isinstance(item, ToolCalled):
            rt.tool_calls += 1
            self.publish(
                ev.BranchToolCall(
                    fork_id=fid,
                    branch_id=rt.branch_id,
                    label=rt.label,
                    tool_name=item.tool_name,
                    args=item.args,
                    tool_call_id=item.tool_call_id,
                )
            )
        elif isinstance(item, ToolReturned):
            self.publish(
                ev.BranchToolResult(
                    fork_id=fid,
                    branch_id=rt.branch_id,
                    label=rt.label,
                    tool_name=item.tool_name,
                    content=item.content,
                    tool_call_id=item.tool_call_id,
                )
            )

    def _fork_spend_check(self, rt: BranchRuntime, streaming_tokens: int) -> str | None:
        """Mid-stream: has the fork-wide budget been crossed (counting the response ``rt`` is
        streaming)? Then every running branch stops with that reason, and so does this stream."""
        cap = self.state.handle.aggregate_budget_usd if self.state.handle else None
        reason = aggregate_spend_reason(self.state.branches.values(), cap, (rt, streaming_tokens))
        if reason is not None:
            self._stop_all_over_aggregate(rt, reason)
        return reason

    def _stop_all_over_aggregate(self, rt: BranchRuntime, reason: str) -> None:
        for other in self.state.branches.values():
            if other.state != "running":
                continue
            other.error = reason
            self.set_state(other, "aggregate_budget_exhausted")
            if other is not rt and other.task is not None and not other.task.done():
                other.task.cancel()

    def _cut(self, rt: BranchRuntime, reason: str) -> None:
        """A budget or token cap was crossed mid-stream: the branch stops with that reason."""
        if rt.state == "running":
            rt.error = reason
            self.set_state(rt, "budget_exhausted")

    def _on_stream_event(self, rt: BranchRuntime, event: object) -> None:
        text = stream_text(event)
        if text:
            self.publish(
                ev.BranchTextDelta(
                    fork_id=self.fork_id or "", branch_id=rt.branch_id, label=rt.label, text=text
                )
            )

    def set_state(self, rt: BranchRuntime, state: BranchState, *, persist: bool = True) -> None:
        rt.state = state
        self.publish(
            ev.BranchStateChanged(
                fork_id=self.fork_id or "",
                branch_id=rt.branch_id,
                label=rt.label,
                state=state,
                error=rt.error,
            )
        )
        if persist:
            self.recorder.persist_or_report(rt)

    # -- budgets ---------------------------------------------------------------------------
    def _account(self, rt: BranchRuntime, response: ModelResponse) -> bool:
        """Price one response; True when this branch must stop now."""
        rt.meter.add(response, self.fc.price_fn)
        self.publish(
            ev.BranchCostUpdated(
                fork_id=self.fork_id or "",
                branch_id=rt.branch_id,
                label=rt.label,
                cumulative_usd=rt.meter.cumulative_usd,
            )
        )
        if rt.state != "running":
            return True
        cap = self.state.handle.aggregate_budget_usd if self.state.handle else None
        has_cap = rt.spec.budget_usd is not None or cap is not None
        if has_cap and rt.meter.price_error and self.fc.options.on_unknown_price == "stop":
            rt.error = f"cost unknown, so the budget cannot be checked: {rt.meter.price_error}"
            self.set_state(rt, "budget_unknown")
            return True
        if rt.meter.over(rt.spec.budget_usd):
            rt.error = f"budget ${rt.spec.budget_usd:g} exhausted (spent ${rt.meter.cost_usd:.6f})"
            self.set_state(rt, "budget_exhausted")
            return True
        if (reason := spend_reason_after(rt.meter, response)) is not None:
            rt.error = reason  # a token cap (unpriced model) or a user price crossed
            self.set_state(rt, "budget_exhausted")
            return True
        if (reason := aggregate_spend_reason(self.state.branches.values(), cap)) is not None:
            self._stop_all_over_aggregate(rt, reason)
            return True
        return False
