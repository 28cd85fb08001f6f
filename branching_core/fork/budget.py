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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelResponse

from branching_core.agent.pricing import PriceFn, default_price, price_response


@dataclass
class BranchMeter:
    """What one branch has spent so far."""

    cost_usd: float = 0.0
    cost_known: bool = True
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    price_error: str | None = None
    """Why the latest response could not be priced although it should have been (see
    :func:`price_response`); ``None`` when it was priced or its model has no known price."""

    def add(self, response: ModelResponse, price_fn: PriceFn) -> float | None:
        """Account one response; returns its price (``None`` if unknown)."""
        self.requests += 1
        usage = response.usage
        self.input_tokens += int(getattr(usage, "input_tokens", 0) or 0)
        self.output_tokens += int(getattr(usage, "output_tokens", 0) or 0)
        price, self.price_error = price_response(response, price_fn)
        if price is None:
            self.cost_known = False
        else:
            self.cost_usd += price
        return price

    @property
    def cumulative_usd(self) -> float | None:
        return self.cost_usd if self.cost_known else None

    def over(self, budget_usd: float | None) -> bool:
        """True once the known cost has crossed ``budget_usd`` (strictly above it)."""
        return budget_usd is not None and self.cost_known and self.cost_usd > budget_usd

    def to_json(self) -> dict[str, object]:
        return {
            "cost_usd": self.cost_usd,
            "cost_known": self.cost_known,
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "price_error": self.price_error,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> BranchMeter:
        """From the JSON the manifest holds (missing or null fields read as zero)."""
        data = data or {}
        return cls(
            cost_usd=float(data.get("cost_usd", 0.0) or 0.0),
            cost_known=bool(data.get("cost_known", True)),
            requests=int(data.get("requests", 0) or 0),
            input_tokens=int(data.get("input_tokens", 0) or 0),
            output_tokens=int(data.get("output_tokens", 0) or 0),
            price_error=str(data["price_error"]) if data.get("price_error") else None,
        )


__all__ = ["BranchMeter", "PriceFn", "default_price", "price_response"]
