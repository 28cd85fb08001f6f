"""Pricing model responses and checking budgets after every one of them.

``price_fn(response) -> float | None`` prices one ``ModelResponse`` in USD. The default
uses genai-prices through pydantic-ai (``ModelResponse.cost()``, via the agent layer's
``response_cost_usd``): the offline model costs 0, a model genai-prices does not know
gives ``None`` (its branch's cost becomes unknown). Tests and custom deployments pass
their own ``price_fn``; the coordinator calls it on the same code path either way.

A ``price_fn`` that raises (or returns something that is not a finite, non-negative
number) is a broken price, not a free response: :func:`price_response` logs it, falls
back to genai-prices, and when that cannot price the response either reports the reason,
which stops a branch that has a budget (state ``budget_unknown``) instead of silently
running it with no cap.

The pricing and the meter (``UsageMeter``) live in ``branching_core.agent.pricing``, shared
with sub-agent runs; this module keeps the fork layer's names for them.
"""

from __future__ import annotations

from branching_core.agent.pricing import PriceFn, UsageMeter, default_price, price_response

__all__ = ["PriceFn", "UsageMeter", "default_price", "price_response"]
