"""Pricing one model response, for every budget (forks and sub-agents alike).

``price_fn(response) -> float | None`` prices one ``ModelResponse`` in USD; the default is
genai-prices (``response_cost_usd``; ``None`` for a model it does not know). A ``price_fn``
that raises, or returns something that is not a finite non-negative number, is a broken
price, not a free response: :func:`price_response` logs it, falls back to genai-prices and,
when that cannot price the response either, returns the reason, so a caller with a budget
stops (state ``budget_unknown``) instead of silently running with no cap.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from pydantic_ai.messages import ModelResponse

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
        raise ValueError(f"not a price: {value!r}")
    return price


def price_response(response: ModelResponse, price_fn: PriceFn) -> tuple[float | None, str | None]:
    """``(price, error)`` of one response: ``error`` says why a price that should exist
    could not be computed (``price_fn`` raised or returned a non-price, and genai-prices
    did not know the model either); ``(None, None)`` is a model without a known price."""
    try:
        return _checked(price_fn(response)), None
    except Exception as exc:
        reason = f"price_fn failed for model {response.model_name!r}: {type(exc).__name__}: {exc}"
    log.warning("%s; trying genai-prices", reason)
    if price_fn is not default_price:
        try:
            price = _checked(default_price(response))
        except Exception:
            price = None
        if price is not None:
            return price, None
    return None, reason


__all__ = ["PriceFn", "default_price", "price_response"]
