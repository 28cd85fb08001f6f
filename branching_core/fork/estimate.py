"""What a fork will cost, before it starts: ``estimate_fork`` (``coord.estimate``).

Why: a fork multiplies spending by its branch count, and every branch starts by re-reading
the whole parent history. The ``/fork`` picker shows this estimate per branch and in total
before Enter, and flags a budget lower than it.

The model (deliberately simple, every input visible on the result):

* ``history_tokens``: the parent history's text (prompts, answers, tool arguments and
  results) at 4 characters per token (no tokenizer is a dependency);
* ``requests``: the run's average model requests per user turn so far (responses in the
  parent history / user prompts), or ``avg_requests`` when given, else ``DEFAULT_REQUESTS``;
* per request ``k`` (0-based) of a branch: input = history + steer + ``k`` times the
  average size of one exchange (a response and its tool results) in the parent history;
  output = the average response size (from the responses' ``usage`` when reported);
* each request is priced through the same ``price_fn`` the coordinator meters real
  responses with (genai-prices by default), on a ``ModelResponse`` carrying the branch's
  model and provider, so tiered prices (long-context surcharges) apply per request.

A model genai-prices does not know gives ``cost_usd=None`` and a note saying so, never 0;
the fork total is then ``None`` too (``known_total_usd`` sums what is known).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from branching_core.errors import InvalidArgumentError
from branching_core.fork.budget import default_price
from branching_core.fork.types import BranchSpec

CHARS_PER_TOKEN = 4
DEFAULT_REQUESTS = 4.0
"""Requests per branch when the parent history has no model response yet."""
DEFAULT_OUTPUT_TOKENS = 400
DEFAULT_EXCHANGE_TOKENS = 1_000
MAX_REQUESTS = 200


def count_tokens(text: str) -> int:
    """Estimated tokens of ``text``: ``ceil(chars / 4)``."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _part_text(part: Any) -> str:
    if isinstance(part, ToolCallPart):
        return part.tool_name + part.args_as_json_str()
    content = getattr(part, "content", None)
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(c if isinstance(c, str) else "" for c in content)
    return str(content)


def message_tokens(message: ModelMessage) -> int:
    """Estimated tokens of one message's text (instructions included)."""
    text = "".join(_part_text(p) for p in message.parts)
    if isinstance(message, ModelRequest) and message.instructions:
        text += message.instructions
    return count_tokens(text)


@dataclass(frozen=True)
class HistoryStats:
    """What the estimate takes from the parent history."""

    tokens: int
    responses: int
    user_turns: int
    output_tokens_per_response: int
    exchange_tokens: int

    @property
    def requests_per_turn(self) -> float | None:
        """Model requests per user turn so far (``None`` before the first response)."""
        if self.responses == 0:
            return None
        return self.responses / max(self.user_turns, 1)


def history_stats(history: Sequence[ModelMessage]) -> HistoryStats:
    tokens = responses = user_turns = 0
    out_reported: list[int] = []
    out_estimated: list[int] = []
    for message in history:
        n = message_tokens(message)
        tokens += n
        if isinstance(message, ModelResponse):
            responses += 1
            out_estimated.append(n)
            reported = int(getattr(message.usage, "output_tokens", 0) or 0)
            if reported:
                out_reported.append(reported)
        elif any(isinstance(p, UserPromptPart) for p in message.parts):
            user_turns += 1
    outs = out_reported or out_estimated
    per_out = round(sum(outs) / len(outs)) if outs else DEFAULT_OUTPUT_TOKENS
    exchange = round(tokens / responses) if responses else DEFAULT_EXCHANGE_TOKENS
    return HistoryStats(tokens, responses, user_turns, max(per_out, 1), max(exchange, 1))


@dataclass
class BranchEstimate:
    """One branch's estimate; ``cost_usd=None`` means no price is known for its model."""

    label: str
    model: str
    requests: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    budget_usd: float | None = None
    note: str | None = None

    @property
    def over_budget(self) -> bool:
        """The branch's own budget is lower than its estimate (unknown cost: not flagged)."""
        return (
            self.budget_usd is not None
            and self.cost_usd is not None
            and self.budget_usd < self.cost_usd
        )

    def line(self) -> str:
        """``tidy  anthropic:claude-sonnet-4-5  ~$0.0312 (6 requests, 41k in)`` for a picker."""
        cost = "price unknown" if self.cost_usd is None else f"~${self.cost_usd:.4f}"
        text = (
            f"{self.label}  {self.model}  {cost} ({self.requests} requests, "
            f"{self.input_tokens / 1000:.0f}k tokens in)"
        )
        if self.over_budget:
            text += f"  ! budget ${self.budget_usd:.2f} is below the estimate"
        if self.note:
            text += f"  [{self.note}]"
        return text


@dataclass
class ForkEstimate:
    """Every branch's estimate, the total, and what it was based on."""

    branches: list[BranchEstimate] = field(default_factory=list)
    history_tokens: int = 0
    requests_per_branch: float = DEFAULT_REQUESTS
    requests_source: str = "default"
    """``history`` (the run's average so far), ``given`` or ``default``."""
    aggregate_budget_usd: float | None = None

    @property
    def total_usd(self) -> float | None:
        """Sum of the branches; ``None`` when any branch's price is unknown."""
        costs = [b.cost_usd for b in self.branches]
        return None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)

    @property
    def known_total_usd(self) -> float:
        return sum(b.cost_usd for b in self.branches if b.cost_usd is not None)

    @property
    def over_aggregate(self) -> bool:
        """The fork-wide budget is lower than the estimated total of the known prices."""
        return (
            self.aggregate_budget_usd is not None
            and self.known_total_usd > self.aggregate_budget_usd
        )

    @property
    def over_budget(self) -> bool:
        return self.over_aggregate or any(b.over_budget for b in self.branches)

    def summary(self) -> str:
        """One line per branch plus the total, for a picker or a log."""
        lines = [b.line() for b in self.branches]
        total = self.total_usd
        if total is None:
            unknown = sum(1 for b in self.branches if b.cost_usd is None)
            head = f"total: at least ~${self.known_total_usd:.4f} ({unknown} price(s) unknown)"
        else:
            head = f"total: ~${total:.4f}"
        head += (
            f"; parent history ~{self.history_tokens} tokens, "
            f"~{self.requests_per_branch:.1f} requests per branch ({self.requests_source})"
        )
        if self.over_aggregate:
            head += f"; ! aggregate budget ${self.aggregate_budget_usd:.2f} is below the estimate"
        return "\n".join([*lines, head])


def _model_ref(model: Any) -> tuple[str, str | None, str]:
    """(display name, provider, model name) of a ``provider:name`` string or a ``Model``."""
    if model is None:
        return "(no model)", None, ""
    if isinstance(model, str):
        provider, sep, name = model.partition(":")
        return (model, provider, name) if sep else (model, None, model)
    name = str(getattr(model, "model_name", "") or "")
    provider = getattr(model, "system", None)
    return (f"{provider}:{name}" if provider else name), provider, name


def _price_request(
    price_fn: Callable[[ModelResponse], float | None],
    provider: str | None,
    name: str,
    input_tokens: int,
    output_tokens: int,
) -> float | None:
    response = ModelResponse(
        parts=[],
        usage=RequestUsage(input_tokens=input_tokens, output_tokens=output_tokens),
        model_name=name or None,
        provider_name=provider,
    )
    try:
        price = price_fn(response)
    except Exception:
        return None
    return None if price is None else float(price)


def estimate_fork(
    specs: Sequence[BranchSpec | dict[str, Any]],
    parent_history: Sequence[ModelMessage],
    *,
    default_model: Any = None,
    price_fn: Callable[[ModelResponse], float | None] | None = None,
    avg_requests: float | None = None,
    aggregate_budget_usd: float | None = None,
) -> ForkEstimate:
    """Estimate each branch's cost (model in the module docstring).

    ``default_model`` is what a spec without ``model`` runs (a ``provider:name`` string or
    a pydantic-ai ``Model``); ``avg_requests`` overrides the requests per branch (e.g. the
    average of earlier forks' branches); ``price_fn`` prices one response (default:
    genai-prices, as the coordinator meters). Raises ``ValueError`` for no spec or a
    negative ``avg_requests``; nothing is run.
    """
    spec_list = [s if isinstance(s, BranchSpec) else BranchSpec.from_json(dict(s)) for s in specs]
    if not spec_list:
        raise InvalidArgumentError("an estimate needs at least one branch spec")
    if avg_requests is not None and avg_requests <= 0:
        raise InvalidArgumentError(f"avg_requests must be positive, got {avg_requests}")
    price_fn = price_fn or default_price
    stats = history_stats(parent_history)
    result = ForkEstimate(history_tokens=stats.tokens, aggregate_budget_usd=aggregate_budget_usd)
    if avg_requests is not None:
        result.requests_per_branch, result.requests_source = float(avg_requests), "given"
    elif stats.requests_per_turn is not None:
        result.requests_per_branch, result.requests_source = stats.requests_per_turn, "history"
    requests = min(max(round(result.requests_per_branch), 1), MAX_REQUESTS)
    for spec in spec_list:
        shown, provider, name = _model_ref(spec.model or default_model)
        base = (
            stats.tokens
            + count_tokens(spec.steer or "")
            + count_tokens(spec.extra_instructions or "")
        )
        total_in = total_out = 0
        cost: float | None = 0.0
        for k in range(requests):
            tokens_in = base + k * stats.exchange_tokens
            total_in += tokens_in
            total_out += stats.output_tokens_per_response
            price = _price_request(
                price_fn, provider, name, tokens_in, stats.output_tokens_per_response
            )
            cost = None if price is None or cost is None else cost + price
        note = None if cost is not None else f"no price known for {shown}"
        result.branches.append(
            BranchEstimate(
                label=spec.label,
                model=shown,
                requests=requests,
                input_tokens=total_in,
                output_tokens=total_out,
                cost_usd=cost,
                budget_usd=spec.budget_usd,
                note=note,
            )
        )
    return result


__all__ = [
    "CHARS_PER_TOKEN",
    "BranchEstimate",
    "ForkEstimate",
    "HistoryStats",
    "count_tokens",
    "estimate_fork",
    "history_stats",
    "message_tokens",
]
