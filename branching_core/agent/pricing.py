"""Pricing one model response, for every budget (forks and sub-agents alike).

``price_fn(response) -> float | None`` prices one ``ModelResponse`` in USD; the default is
genai-prices (``response_cost_usd``; ``None`` for a model it does not know). A ``price_fn``
that raises, or returns something that is not a finite non-negative number, is a broken
price, not a free response: :func:`price_response` logs it, falls back to genai-prices and,
when that cannot price the response either, returns the reason, so a caller with a budget
stops (state ``budget_unknown``) instead of silently running with no cap.

:class:`UsageMeter` is the one usage meter: a fork branch's (``BranchRuntime.meter``,
saved in the fork manifest) and a sub-agent run's both add every response to one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelResponse

from branching_core.errors import InvalidArgumentError, error_name

PriceFn = Callable[[ModelResponse], "float | None"]

log = logging.getLogger(__name__)


def default_price(response: ModelResponse) -> float | None:
    from branching_core.agent.models import response_cost_usd

    return response_cost_usd(response)


def _checked(value: object) -> float | None:
    if value is None:
        return None
    price = float(value)  # type: ignore[arg-type]  # anything else raises: a broken price
    if not math.isfinite(price) or price < 0:
        raise InvalidArgumentError(f"not a price: {value!r}")
    return price


def price_response(response: ModelResponse, price_fn: PriceFn) -> tuple[float | None, str | None]:
    """``(price, error)`` of one response: ``error`` says why a price that should exist
    could not be computed (``price_fn`` raised or returned a non-price, and genai-prices
    did not know the model either); ``(None, None)`` is a model without a known price."""
    try:
        return _checked(price_fn(response)), None
    except Exception as exc:
        reason = f"price_fn failed for model {response.model_name!r}: {error_name(exc)}: {exc}"
    log.warning("%s; trying genai-prices", reason)
    if price_fn is not default_price:
        try:
            price = _checked(default_price(response))
        except Exception:
            price = None
        if price is not None:
            return price, None
    return None, reason


@dataclass
class UsageMeter:
    """What one run (a fork branch or a sub-agent run) has spent so far."""

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
    def from_json(cls, data: dict[str, Any] | None) -> UsageMeter:
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


__all__ = ["PriceFn", "UsageMeter", "default_price", "price_response"]
