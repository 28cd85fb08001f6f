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
from branching_core.agent.model_label import model_label
from branching_core.agent.spend import SPEND, BudgetRule, SpendContext, budget_rule
from branching_core.fork import events as ev


def resolve_branch_model(name: str, default_model: Any) -> Any:
    """A branch's own model without a resolver: with the parent model's settings when it has
    them (a ``ServerModel`` carries its ``ModelConfig``), so the name reaches the same server."""
    from branching_core.agent.models import connect_model, resolve_model

    config = getattr(default_model, "config", None)
    if isinstance(config, ModelConfig):
        return connect_model(name, config)
    return resolve_model(name)


def model_label_for_budget(model: Any) -> str | None:
    """The name prices are looked up by (``provider:name``; ``offline`` for the offline model)."""
    from branching_core.agent.offline import OfflineModel

    return "offline" if isinstance(model, OfflineModel) else model_label(model, for_prices=True)


class _BranchSpend(SpendContext):
    """A :class:`SpendContext` that also prices responses itself under a user price."""

    priced_usd: float = 0.0
    branch_id: str = ""
    price_rule: BudgetRule | None = None  # how this model is priced, whatever the budget


def branch_spend(
    rt: Any,
    model: Any,
    cut: Callable[[Any, str], None],
    publish: Callable[[Any], None] | None = None,
    fork_id: str = "",
    fork_check: Callable[[Any, int], str | None] | None = None,
) -> SpendContext:
    """The spend context of branch ``rt`` running ``model`` (set in the branch task's context).

    ``cut(rt, reason)`` stops the branch when its cap is crossed mid-stream; ``publish`` gets a
    :class:`~branching_core.fork.events.BranchResponseRestarted` when a cut stream is retried.
    """

    config: ModelConfig | None = getattr(model, "config", None)
    name = model_label_for_budget(model)
    rule: BudgetRule = budget_rule(rt.spec.budget_usd, name, config)
    meter = rt.meter
    context = _BranchSpend(rule=rule, spent=lambda: (0.0, 0), on_cut=lambda r: cut(rt, r))
    context.priced_usd = 0.0
    context.branch_id = rt.branch_id
    # How the model is priced, independent of a per-branch budget: a fork-wide budget is
    # checked with the same user price or token cap (aggregate_spend_reason).
    context.price_rule = budget_rule(1.0, name, config)
    rt.spend = context
    if fork_check is not None:
        context.fork_check = lambda streaming_tokens: fork_check(rt, streaming_tokens)
    if publish is not None:
        context.on_restart = lambda: publish(response_restarted(fork_id, rt))

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
    priced = context.price_rule if isinstance(context, _BranchSpend) else None
    price = rule.price or (priced.price if priced is not None else None)
    if price is not None and isinstance(context, _BranchSpend):
        usage = response.usage
        context.priced_usd += price.cost(
            int(usage.input_tokens or 0), int(usage.output_tokens or 0)
        )
    cost, tokens = context.spent()
    return rule.check(cost_usd=cost, tokens=tokens)


def aggregate_spend_reason(
    runtimes: Any, cap: float | None, streaming: tuple[Any, int] | None = None
) -> str | None:
    """Why a fork-wide budget ``cap`` is exhausted, or None.

    Each branch counts in the currency its model is priced in: the listed price (the meter),
    the user's price (``[fork.prices]`` / ``--price``), or, for a model with no price at all,
    its tokens against the token cap; so an unpriced model is never "no budget".
    ``streaming`` = (branch, tokens of its response streaming now), for the mid-stream check."""
    if cap is None:
        return None
    usd, tokens, token_cap = 0.0, 0, None
    for rt in runtimes:
        context = getattr(rt, "spend", None)
        rule = getattr(context, "price_rule", None)
        kind = rule.kind if rule is not None else "known_price"
        if kind == "user_price" and context is not None:
            usd += context.priced_usd
        elif kind == "token_cap" and rule is not None and not (
            rt.meter.cost_known and rt.meter.requests
        ):
            # no price anywhere (nothing priced yet, or price_fn did not price it either)
            tokens += int(rt.meter.input_tokens) + int(rt.meter.output_tokens)
            if streaming is not None and streaming[0] is rt:
                tokens += streaming[1]
            token_cap = rule.token_cap
        else:
            usd += rt.meter.cost_usd
    if usd > cap:
        return f"aggregate budget ${cap:g} exhausted (fork spent ${usd:.6f})"
    if token_cap is not None and tokens > token_cap:
        return (
            f"aggregate budget ${cap:g}: token cap {token_cap} crossed ({tokens} tokens; "
            "no known price for the model)"
        )
    return None


def budget_description(budget_usd: float | None, model: Any, config: ModelConfig | None) -> str:
    """What the picker shows: which rule a budget runs under for this model."""
    return budget_rule(budget_usd, model_label(model, for_prices=True), config).describe()


def history_estimated(history: Any) -> bool:
    """Whether any response in ``history`` carries estimated (not server-reported) usage."""
    from branching_core.agent.spend import usage_estimated

    return any(
        isinstance(m, ModelResponse) and usage_estimated(m.usage) for m in history or ()
    )


def budget_rule_text(rt: Any, default_model: Any) -> str | None:
    """The budget rule of branch ``rt`` in words (None without a budget), for cost displays."""
    if rt.spec.budget_usd is None:
        return None
    context = SPEND.get()
    if context is not None and getattr(context, "branch_id", None) == rt.branch_id:
        return context.rule.describe()
    model = rt.spec.model or default_model
    config = getattr(default_model, "config", None)
    return budget_description(rt.spec.budget_usd, model, config)


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


def response_restarted(fork_id: str, rt: Any) -> ev.BranchResponseRestarted:
    return ev.BranchResponseRestarted(fork_id=fork_id, branch_id=rt.branch_id, label=rt.label)


__all__ = [
    "aggregate_spend_reason",
    "branch_spend",
    "budget_description",
    "budget_rule_text",
    "history_estimated",
    "model_label_for_budget",
    "resolve_branch_model",
    "response_restarted",
    "response_started",
    "spend_reason_after",
]
