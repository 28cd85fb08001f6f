"""15.2: a response that cannot be priced stops a budgeted branch (``budget_unknown``).

A ``price_fn`` that raised used to make the cost "unknown", and an unknown cost never
crossed a cap: every budget was silently off. Now the failure is logged, genai-prices is
tried instead, and when nothing can price the response a branch with a budget stops with
a clear state; a branch without a budget just shows its cost as unknown.
"""

from __future__ import annotations

import logging
import math

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse

from branching_core.fork import BranchSpec, ForkCoordinator
from branching_core.fork.types import FINAL_STATES
from tests.support.typed import view_of

from .helpers import Scripted, call


def broken_price(response: ModelResponse) -> float:
    raise KeyError("price table missing")


def _script() -> Scripted:
    return Scripted(
        {
            "A": [call("write_file", path="a.txt", content="a"), "A: over"],
            "B": [call("write_file", path="b.txt", content="b"), "B: over"],
        }
    )


async def test_raising_price_fn_stops_a_budgeted_branch(ws, runner, caplog) -> None:
    coord = ForkCoordinator(
        Agent(_script().model), workspace=ws, command_runner=runner, price_fn=broken_price
    )
    with caplog.at_level(logging.WARNING):
        await coord.fork(
            [BranchSpec("a", "A", budget_usd=1.0), BranchSpec("b", "B")], parent_history=[]
        )
        await coord.wait(timeout=20)
    a, b = coord.get_branch("a"), coord.get_branch("b")
    assert a.state == "budget_unknown", a.status()
    assert "price table missing" in (a.error or "") and "budget" in (a.error or "")
    assert not (view_of(a) / "a.txt").exists(), "the tool of the unpriced response ran"
    assert "budget_unknown" in FINAL_STATES
    # no budget: the cost is simply unknown, the branch runs to its end
    assert b.state == "done" and b.status().cost_usd is None and (view_of(b) / "b.txt").exists()
    assert any("price table missing" in r.getMessage() for r in caplog.records)
    await coord.aclose()


@pytest.mark.parametrize("bad", [math.nan, -1.0, "free"])
async def test_a_non_price_counts_as_unknown(ws, runner, bad: object) -> None:
    coord = ForkCoordinator(
        Agent(_script().model), workspace=ws, command_runner=runner, price_fn=lambda _r: bad
    )
    await coord.fork([BranchSpec("a", "A")], parent_history=[], aggregate_budget_usd=5.0)
    await coord.wait(timeout=20)
    assert coord.get_branch("a").state == "budget_unknown"
    await coord.aclose()


async def test_continue_policy_runs_on_with_an_unknown_cost(ws, runner) -> None:
    coord = ForkCoordinator(
        Agent(_script().model),
        workspace=ws,
        command_runner=runner,
        price_fn=broken_price,
        on_unknown_price="continue",
    )
    await coord.fork([BranchSpec("a", "A", budget_usd=1.0)], parent_history=[])
    await coord.wait(timeout=20)
    a = coord.get_branch("a")
    assert a.state == "done" and a.status().cost_usd is None
    await coord.aclose()
