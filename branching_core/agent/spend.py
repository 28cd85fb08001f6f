"""What a response cost when nobody told us, and which budget rule a branch runs under.

Why: a streaming OpenAI-compatible server that ignores ``stream_options.include_usage`` sends no
usage, and pydantic-ai then records ``RequestUsage(unmeasured_requests=1)`` with zero tokens; a
model genai-prices does not know has no price. Both used to switch budgets off silently. Here:

* :func:`estimate_usage` turns an unmeasured response into an *estimate* from its text
  (about four characters a token), marked with :data:`ESTIMATED` in ``usage.details`` so every
  display can say "~" instead of a false 0;
* :func:`budget_rule` says how a USD budget is enforced for a model: by its known price, by a
  price the user set (``[fork.prices]``, ``--price``), or, with neither, by a token cap, never by
  nothing; :meth:`BudgetRule.check` is the one test used both mid-stream and after a response;
* :data:`SPEND` carries the running branch's budget into the model wrapper, so a runaway
  response is cut while it streams.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.usage import RequestUsage

from branching_core.agent.model_config import DEFAULT_TOKEN_CAP, ModelConfig, Price
from branching_core.errors import BranchingError

#: Key set to 1 in ``RequestUsage.details`` when the token counts are estimated from text.
ESTIMATED = "forkdeck_estimated"
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A rough token count (English and code average about four characters a token)."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN if text else 0


def _message_text(message: Any) -> str:
    pieces: list[str] = []
    for part in getattr(message, "parts", ()):
        for attr in ("content", "args"):
            value = getattr(part, attr, None)
            if isinstance(value, str):
                pieces.append(value)
            elif value is not None:
                pieces.append(repr(value))
    instructions = getattr(message, "instructions", None)
    if isinstance(instructions, str):
        pieces.append(instructions)
    return "".join(pieces)


def estimate_input_tokens(messages: Sequence[ModelMessage]) -> int:
    """Estimated prompt tokens of a request made of ``messages``."""
    return sum(estimate_tokens(_message_text(m)) for m in messages)


def estimate_usage(messages: Sequence[ModelMessage], response: ModelResponse) -> RequestUsage:
    """Estimated usage of ``response`` to the request ``messages`` (marked :data:`ESTIMATED`)."""
    input_tokens = estimate_input_tokens(messages)
    output_tokens = estimate_tokens(_message_text(response))
    return RequestUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        details={ESTIMATED: 1},
    )


def usage_unmeasured(usage: RequestUsage | None) -> bool:
    """True when the server reported no usage for this response (pydantic-ai counted it apart)."""
    return usage is not None and bool(getattr(usage, "unmeasured_requests", 0)) and not (
        usage.input_tokens or usage.output_tokens
    )


def usage_estimated(usage: Any) -> bool:
    """True when ``usage`` (a ``RequestUsage``/``RunUsage``) holds estimated token counts."""
    details = getattr(usage, "details", None) or {}
    return bool(details.get(ESTIMATED))


def known_price(model_name: str | None) -> bool:
    """Whether genai-prices knows ``model_name`` (``provider:name`` or a bare name)."""
    if not model_name:
        return False
    from branching_core.agent.models import response_cost_usd

    provider, _, bare = model_name.partition(":")
    probe = ModelResponse(
        parts=[],
        usage=RequestUsage(input_tokens=1000, output_tokens=1000),
        model_name=bare or model_name,
        provider_name=provider if bare else None,
    )
    return response_cost_usd(probe) is not None


BudgetKind = Literal["none", "known_price", "user_price", "token_cap", "free"]


@dataclass(frozen=True)
class BudgetRule:
    """How one branch's USD budget is enforced (see the module docstring)."""

    kind: BudgetKind
    budget_usd: float | None = None
    price: Price | None = None
    token_cap: int | None = None

    def describe(self) -> str:
        """One phrase for the picker and the branch error: which rule is in force."""
        if self.kind == "none":
            return "no budget"
        if self.kind == "free":
            return f"${self.budget_usd:g} (offline model: free)"
        if self.kind == "known_price":
            return f"${self.budget_usd:g} at the model's listed price"
        if self.kind == "user_price" and self.price is not None:
            return (
                f"${self.budget_usd:g} at your price ${self.price.input_per_mtok:g}/"
                f"${self.price.output_per_mtok:g} per Mtok"
            )
        return f"token cap {self.token_cap} (no known price for this model)"

    def check(self, *, cost_usd: float | None, tokens: int) -> str | None:
        """The reason to stop now, or None. ``cost_usd``: spent so far (None: unknown)."""
        if self.kind in ("none", "free") or self.budget_usd is None:
            return None
        if self.kind == "token_cap":
            if self.token_cap is not None and tokens > self.token_cap:
                return (
                    f"token cap {self.token_cap} reached ({tokens} tokens; the model has no known "
                    "price: set [fork.prices] or --price to budget in USD)"
                )
            return None
        if cost_usd is not None and cost_usd > self.budget_usd:
            return f"budget ${self.budget_usd:g} exhausted (spent ${cost_usd:.6f})"
        return None


def budget_rule(
    budget_usd: float | None, model_name: str | None, config: ModelConfig | None = None
) -> BudgetRule:
    """The rule for a branch with ``budget_usd`` running ``model_name`` (:class:`BudgetRule`)."""
    from branching_core.agent.offline import is_offline_name

    if budget_usd is None:
        return BudgetRule("none")
    if model_name and is_offline_name(model_name.split(" ")[0]):
        return BudgetRule("free", budget_usd)
    config = config or ModelConfig()
    price = config.price_for(model_name)
    if price is not None:
        return BudgetRule("user_price", budget_usd, price)
    if known_price(model_name):
        return BudgetRule("known_price", budget_usd)
    return BudgetRule("token_cap", budget_usd, token_cap=config.token_cap or DEFAULT_TOKEN_CAP)


def budget_note(model_name: str | None, config: ModelConfig | None = None) -> str | None:
    """How a budget would be enforced for ``model_name``, for the fork picker (None: offline)."""
    rule = budget_rule(1.0, model_name, config)
    if rule.kind == "free":
        return None
    if rule.kind == "user_price" and rule.price is not None:
        return (
            f"budgets use your price ${rule.price.input_per_mtok:g}/"
            f"${rule.price.output_per_mtok:g} per Mtok"
        )
    if rule.kind == "known_price":
        return "budgets use the model's listed price"
    return f"no known price: a budget is a {rule.token_cap}-token cap ([fork.prices] sets one)"


def price_fn_for(config: ModelConfig) -> Callable[[ModelResponse], float | None]:
    """A coordinator ``price_fn``: the user's price for the response's model, else genai-prices."""
    from branching_core.agent.models import response_cost_usd

    def price(response: ModelResponse) -> float | None:
        user = config.price_for(response.model_name)
        if user is not None:
            usage = response.usage
            return user.cost(int(usage.input_tokens or 0), int(usage.output_tokens or 0))
        return response_cost_usd(response)

    return price


def running_price(
    rule: BudgetRule, model_name: str | None, in_tokens: int, out_tokens: int
) -> float:
    """What a response of this many tokens costs under ``rule`` (0 when not priced in USD)."""
    if rule.price is not None:
        return rule.price.cost(in_tokens, out_tokens)
    if rule.kind == "known_price" and model_name:
        from branching_core.agent.models import response_cost_usd

        provider, _, bare = model_name.partition(":")
        probe = ModelResponse(
            parts=[],
            usage=RequestUsage(input_tokens=in_tokens, output_tokens=out_tokens),
            model_name=bare or model_name,
            provider_name=provider if bare else None,
        )
        return response_cost_usd(probe) or 0.0
    return 0.0


@dataclass
class SpendContext:
    """The running branch's budget, as the model wrapper sees it while a response streams.

    ``spent()`` returns (cost so far or None, tokens so far) before the current response;
    ``on_cut(reason)`` is called once when the cap is crossed, before the stream is cut.
    """

    rule: BudgetRule
    spent: Callable[[], tuple[float | None, int]]
    on_cut: Callable[[str], None]
    on_restart: Callable[[], None] | None = None
    """Called when a cut stream is asked again (its partial text is void)."""
    fork_check: Callable[[int], str | None] | None = None
    """A fork-wide cap, given the tokens of the response streaming now: the reason to cut,
    or None (an aggregate budget over several branches, checked mid-stream too)."""


SPEND: ContextVar[SpendContext | None] = ContextVar("forkdeck_spend", default=None)


class BudgetCut(BranchingError):
    """A response was cut mid-stream because the branch's budget or token cap was crossed."""


__all__ = [
    "ESTIMATED",
    "SPEND",
    "BudgetCut",
    "BudgetRule",
    "SpendContext",
    "budget_note",
    "budget_rule",
    "estimate_input_tokens",
    "estimate_tokens",
    "estimate_usage",
    "known_price",
    "price_fn_for",
    "running_price",
    "usage_estimated",
    "usage_unmeasured",
]
