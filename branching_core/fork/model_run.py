"""The model side of running one branch: its budget rule while streaming, response boundaries.

Why apart from the coordinator: the coordinator drives ``agent.iter``; what a *real server*
needs around that (a budget that also holds for unpriced models and cuts a runaway stream,
events that mark where each response starts) is kept here so ``_run_branch`` only calls it.
Branch runtimes are read duck-typed (``spec.budget_usd``, ``meter``), nothing is written to them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import ModelResponse, UserPromptPart

from branching_core.agent.model_config import ModelConfig
from branching_core.agent.spend import SPEND, BudgetRule, SpendContext, budget_rule
from branching_core.fork import events as ev

RESTART_MARK = "forkdeck_restart"


def _model_name(model: Any) -> str | None:
    if model is None:
        return None
    if isinstance(model, str):
        return model
    name = getattr(model, "model_name", None)
    system = getattr(model, "system", None)
    if name and system and system not in ("function", "test", "offline"):
        return f"{system}:{name}"
    return name


class _BranchSpend(SpendContext):
    """A :class:`SpendContext` that also prices responses itself under a user price."""

    priced_usd: float = 0.0


def branch_spend(rt: Any, model: Any, cut: Callable[[Any, str], None]) -> SpendContext:
    """The spend context of branch ``rt`` running ``model`` (set in the branch task's context)."""
    from branching_core.agent.offline import OfflineModel

    config: ModelConfig | None = getattr(model, "config", None)
    name = "offline" if isinstance(model, OfflineModel) else _model_name(model)
    rule: BudgetRule = budget_rule(rt.spec.budget_usd, name, config)
    meter = rt.meter
    context = _BranchSpend(rule=rule, spent=lambda: (0.0, 0), on_cut=lambda r: cut(rt, r))
    context.priced_usd = 0.0

    def spent() -> tuple[float | None, int]:
        cost = context.priced_usd if rule.kind == "user_price" else meter.cumulative_usd
        return cost, int(meter.input_tokens) + int(meter.output_tokens)

    context.spent = spent
    return context


def spend_reason_after(meter: Any, response: ModelResponse) -> str | None:
    """After a complete response: the reason the running branch must stop, or None."""
    context = SPEND.get()
    if context is None:
        return None
    rule = context.rule
    if rule.price is not None and isinstance(context, _BranchSpend):
        usage = response.usage
        context.priced_usd += rule.price.cost(
            int(usage.input_tokens or 0), int(usage.output_tokens or 0)
        )
    cost, tokens = context.spent()
    return rule.check(cost_usd=cost, tokens=tokens)


def budget_description(budget_usd: float | None, model: Any, config: ModelConfig | None) -> str:
    """What the picker shows: which rule a budget runs under for this model."""
    return budget_rule(budget_usd, _model_name(model), config).describe()


def response_started(fork_id: str, rt: Any, node: Any) -> ev.BranchResponseStarted:
    """The boundary event for the model request ``node`` is about to send."""
    request = getattr(node, "request", None)
    prompts = tuple(
        part.content
        for part in getattr(request, "parts", ())
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    )
    return ev.BranchResponseStarted(
        fork_id=fork_id,
        branch_id=rt.branch_id,
        label=rt.label,
        request=int(rt.meter.requests) + 1,
        prompts=prompts,
    )


def is_restart(event: Any) -> bool:
    """Whether a stream event opens the retry of a cut response (see ``ServerModel``)."""
    return bool(getattr(event, RESTART_MARK, False))


def response_restarted(fork_id: str, rt: Any) -> ev.BranchResponseRestarted:
    return ev.BranchResponseRestarted(fork_id=fork_id, branch_id=rt.branch_id, label=rt.label)


__all__ = [
    "branch_spend",
    "budget_description",
    "is_restart",
    "response_restarted",
    "response_started",
    "spend_reason_after",
]
