"""coord.estimate(): the cost of a fork before it starts, from a real parent history (a real
pydantic-ai Agent run on a FunctionModel) and real genai-prices prices."""

from __future__ import annotations

import pytest
from genai_prices import Usage, calc_price
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse

from branching_core.fork import BranchSpec, ForkCoordinator
from branching_core.fork.estimate import (
    count_tokens,
    estimate_fork,
    history_stats,
)
from branching_core.workspace import Workspace

from .conftest import project, runner, ws
from .helpers import Scripted, call

__all__ = ["project", "runner", "ws"]


async def parent_history() -> list[ModelMessage]:
    """Two user turns: the first makes two tool calls (3 responses), the second none (1)."""
    scripted = Scripted({"look around": [call("list_files", path="."), call("noop", x=1)]})
    agent = Agent(scripted.model)

    @agent.tool_plain
    def list_files(path: str) -> str:
        return "a.py\nb.py\n" * 50

    @agent.tool_plain
    def noop(x: int) -> str:
        return "ok"

    first = await agent.run("look around")
    second = await agent.run("thanks", message_history=first.all_messages())
    return second.all_messages()


def _price(model: str, tokens_in: int, tokens_out: int) -> float:
    provider, name = model.split(":", 1)
    calc = calc_price(
        Usage(input_tokens=tokens_in, output_tokens=tokens_out), name, provider_id=provider
    )
    return float(calc.total_price)


async def test_estimate_from_the_run_so_far() -> None:
    history = await parent_history()
    stats = history_stats(history)
    assert (stats.responses, stats.user_turns) == (4, 2)
    assert stats.requests_per_turn == 2.0
    assert stats.tokens > count_tokens("a.py\nb.py\n" * 50)  # the tool result is counted

    est = estimate_fork(
        [BranchSpec("a", "try A", model="openai:gpt-4.1"), BranchSpec("b", "try B")],
        history,
        default_model="anthropic:claude-sonnet-4-5",
    )
    assert (est.requests_source, est.requests_per_branch) == ("history", 2.0)
    a, b = est.branches
    assert (a.model, b.model, a.requests) == ("openai:gpt-4.1", "anthropic:claude-sonnet-4-5", 2)
    # request k re-reads the history plus k exchanges; each is priced on its own
    base = stats.tokens + count_tokens("try A")
    want = sum(
        _price("openai:gpt-4.1", base + k * stats.exchange_tokens, stats.output_tokens_per_response)
        for k in range(2)
    )
    assert a.cost_usd == pytest.approx(want)
    assert a.input_tokens == 2 * base + stats.exchange_tokens
    assert b.cost_usd is not None and b.cost_usd > 0
    assert a.cost_usd is not None
    assert est.total_usd == pytest.approx(a.cost_usd + b.cost_usd)
    assert not est.over_budget


async def test_unknown_price_is_said_never_zero() -> None:
    history = await parent_history()
    est = estimate_fork(
        [
            BranchSpec("known", "x", model="openai:gpt-4.1"),
            BranchSpec("mystery", "y", model="openai:no-such-model-xyz"),
            BranchSpec("local", "z", model="offline"),
        ],
        history,
    )
    known, mystery, local = est.branches
    assert (
        mystery.cost_usd is None and mystery.note == "no price known for openai:no-such-model-xyz"
    )
    assert "price unknown" in mystery.line()
    assert local.cost_usd == 0.0 and local.note is None  # the offline model is free, and known
    assert est.total_usd is None
    assert est.known_total_usd == pytest.approx(known.cost_usd or 0)
    assert "1 price(s) unknown" in est.summary()


async def test_budgets_lower_than_the_estimate_are_flagged() -> None:
    history = await parent_history()
    specs = [
        BranchSpec("cheap", "x", model="openai:gpt-4.1", budget_usd=0.000001),
        BranchSpec("roomy", "y", model="openai:gpt-4.1", budget_usd=100.0),
    ]
    est = estimate_fork(specs, history, aggregate_budget_usd=0.000001, avg_requests=10)
    cheap, roomy = est.branches
    assert cheap.over_budget and not roomy.over_budget
    assert "budget $0.00 is below the estimate" in cheap.line()
    assert est.over_aggregate and est.over_budget
    assert (est.requests_source, cheap.requests) == ("given", 10)
    assert "aggregate budget" in est.summary()


async def test_no_history_uses_the_default_turns() -> None:
    est = estimate_fork([{"label": "a", "steer": "go", "model": "openai:gpt-4.1"}], [])
    assert est.requests_source == "default" and est.branches[0].requests == 4
    assert est.history_tokens == 0 and est.branches[0].cost_usd is not None


async def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        estimate_fork([], [])
    with pytest.raises(ValueError, match="positive"):
        estimate_fork([BranchSpec("a", "x")], [], avg_requests=0)


async def test_coordinator_prices_with_its_own_price_fn(ws: Workspace) -> None:
    """coord.estimate() prices through the same price_fn the coordinator meters with."""
    seen: list[ModelResponse] = []

    def price(response: ModelResponse) -> float:
        seen.append(response)
        return response.usage.input_tokens / 1_000_000

    history = await parent_history()
    scripted = Scripted({})
    coord = ForkCoordinator(
        Agent(scripted.model), workspace=ws, price_fn=price, default_model="anthropic:x-model"
    )
    est = coord.estimate([BranchSpec("a", "x"), BranchSpec("b", "y", model="openai:m")], history)
    assert [b.model for b in est.branches] == ["anthropic:x-model", "openai:m"]
    assert {(r.provider_name, r.model_name) for r in seen} == {
        ("anthropic", "x-model"),
        ("openai", "m"),
    }
    a = est.branches[0]
    assert a.cost_usd == pytest.approx(a.input_tokens / 1_000_000)
    assert coord.handle is None  # nothing was forked
