"""Pricing model responses and checking budgets after every one of them.

``price_fn(response) -> float | None`` prices one ``ModelResponse`` in USD. The default
uses genai-prices through pydantic-ai (``ModelResponse.cost()``, via the agent layer's
``response_cost_usd``): the offline model costs 0, a model genai-prices does not know
gives ``None`` (its branch's cost becomes unknown and its cap cannot fire). Tests and
custom deployments pass their own ``price_fn``; the coordinator calls it on the same code
path either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic_ai.messages import ModelResponse

PriceFn = Callable[[ModelResponse], "float | None"]


def default_price(response: ModelResponse) -> float | None:
    from branching_core.agent import response_cost_usd

    return response_cost_usd(response)


@dataclass
class BranchMeter:
    """What one branch has spent so far."""

    cost_usd: float = 0.0
    cost_known: bool = True
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, response: ModelResponse, price_fn: PriceFn) -> float | None:
        """Account one response; returns its price (``None`` if unknown)."""
        self.requests += 1
        usage = response.usage
        self.input_tokens += int(getattr(usage, "input_tokens", 0) or 0)
        self.output_tokens += int(getattr(usage, "output_tokens", 0) or 0)
        try:
            price = price_fn(response)
        except Exception:
            price = None
        if price is None:
            self.cost_known = False
        else:
            self.cost_usd += float(price)
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
        }

    @classmethod
    def from_json(cls, data: dict[str, object] | None) -> BranchMeter:
        data = data or {}
        return cls(
            cost_usd=float(data.get("cost_usd", 0.0) or 0.0),  # type: ignore[arg-type]
            cost_known=bool(data.get("cost_known", True)),
            requests=int(data.get("requests", 0) or 0),  # type: ignore[call-overload]
            input_tokens=int(data.get("input_tokens", 0) or 0),  # type: ignore[call-overload]
            output_tokens=int(data.get("output_tokens", 0) or 0),  # type: ignore[call-overload]
        )


def aggregate_over(meters: list[BranchMeter], cap: float | None) -> bool:
    """True once the sum of the known branch costs has crossed the fork-wide ``cap``."""
    if cap is None:
        return False
    return sum(m.cost_usd for m in meters) > cap


__all__ = ["BranchMeter", "PriceFn", "aggregate_over", "default_price"]
