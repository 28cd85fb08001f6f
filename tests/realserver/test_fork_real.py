"""Issue 14 items 5-12 on a real HTTP server: forks, limits, budgets, cut streams, errors.

Every branch runs pydantic-ai's OpenAI provider against the scripted server on 127.0.0.1;
what is asserted is the branch state, its reason, and what the server received.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelResponse

from branching_core.agent.spend import usage_estimated
from branching_core.fork import BranchSpec
from branching_core.fork import events as ev
from tests.realserver.fork_helpers import coordinator, server_config, texts
from tests.support.openai_server import Reply, ScriptedServer


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    return ws


# -- item 5 ----------------------------------------------------------------------------------------
async def test_branch_whose_model_cannot_be_resolved_fails_with_the_reason(
    root: Path, server: ScriptedServer
) -> None:
    coord, seen = coordinator(root, server_config(server))
    await coord.fork(
        [BranchSpec("good", "hi"), BranchSpec("bad", "hi", model="anthropic:claude-x")],
        parent_history=[],
    )
    statuses = {s.label: s for s in await coord.wait(timeout=30)}
    assert statuses["good"].state == "done"
    assert statuses["bad"].state == "failed"
    assert "ANTHROPIC_API_KEY" in (statuses["bad"].error or "")  # no key in this test env
    failed = [e for e in seen if isinstance(e, ev.BranchStateChanged) and e.state == "failed"]
    assert failed and failed[0].label == "bad" and failed[0].error
    await coord.abort_fork()


# -- item 8: max_tokens, first-token and request timeouts ----------------------------------------
async def test_max_tokens_is_sent_with_every_request(root: Path, server: ScriptedServer) -> None:
    coord, _ = coordinator(root, server_config(server, max_tokens=77))
    await coord.fork([BranchSpec("a", "hi")], parent_history=[])
    await coord.wait(timeout=30)
    assert server.chat_requests and all(
        r.get("max_tokens") == 77 or r.get("max_completion_tokens") == 77
        for r in server.chat_requests
    )
    await coord.abort_fork()


async def test_server_that_never_answers_fails_on_first_token_timeout(
    root: Path, server: ScriptedServer
) -> None:
    server.push(Reply.hang())
    coord, _ = coordinator(root, server_config(server, first_token_timeout=0.5))
    await coord.fork([BranchSpec("a", "hi")], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    assert status.state == "failed"
    assert "first_token_timeout" in (status.error or "") and server.url in (status.error or "")
    await coord.abort_fork()


async def test_rambling_stream_fails_on_request_timeout(
    root: Path, server: ScriptedServer
) -> None:
    server.push(Reply.endless(delay=0.02))
    coord, _ = coordinator(root, server_config(server, request_timeout=1.0))
    await coord.fork([BranchSpec("a", "hi")], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    assert status.state == "failed"
    assert "request_timeout" in (status.error or "")
    await coord.abort_fork()


# -- item 6: no usage chunk -> estimated, never 0 --------------------------------------------------
async def test_stream_without_usage_gets_estimated_tokens(
    root: Path, server: ScriptedServer
) -> None:
    server.push(Reply.text("Some", " words", " here.", usage=False))
    coord, _ = coordinator(root, server_config(server))
    await coord.fork([BranchSpec("a", "hi")], parent_history=[])
    await coord.wait(timeout=30)
    (cost,) = coord.fork_cost().branches
    assert cost.input_tokens > 0 and cost.output_tokens > 0
    assert cost.tokens_estimated
    response = coord.get_branch("a").history[-1]
    assert isinstance(response, ModelResponse)
    assert usage_estimated(response.usage)
    await coord.abort_fork()


async def test_stream_with_usage_is_reported_not_estimated(
    root: Path, server: ScriptedServer
) -> None:
    coord, _ = coordinator(root, server_config(server))
    await coord.fork([BranchSpec("a", "hi")], parent_history=[])
    await coord.wait(timeout=30)
    (cost,) = coord.fork_cost().branches
    assert (cost.input_tokens, cost.output_tokens) == (11, 4) and not cost.tokens_estimated
    await coord.abort_fork()


# -- item 7: budgets on an unlisted model --------------------------------------------------------
async def test_user_price_budget_cuts_a_runaway_stream(root: Path, server: ScriptedServer) -> None:
    from branching_core.agent.model_config import Price

    server.push(Reply.endless(delay=0.005))
    config = server_config(server, prices={"scripted-model": Price(1000.0, 1000.0)})
    coord, _ = coordinator(root, config)
    await coord.fork([BranchSpec("a", "hi", budget_usd=0.01)], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    assert status.state == "budget_exhausted", status.error
    assert "budget $0.01" in (status.error or "")
    (cost,) = coord.fork_cost().branches
    assert cost.budget_rule and "your price" in cost.budget_rule
    await coord.abort_fork()


async def test_unpriced_model_budget_falls_back_to_a_token_cap(
    root: Path, server: ScriptedServer
) -> None:
    server.push(Reply.endless(delay=0.005))
    coord, _ = coordinator(root, server_config(server, token_cap=300))
    await coord.fork([BranchSpec("a", "hi", budget_usd=1e-9)], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    assert status.state == "budget_exhausted", status.error
    assert "token cap 300" in (status.error or "")
    assert "token cap 300" in (coord.fork_cost().branches[0].budget_rule or "")
    await coord.abort_fork()


# -- item 9: cut streams and one slot ------------------------------------------------------------
async def test_cut_stream_is_retried_once(root: Path, server: ScriptedServer) -> None:
    server.push(Reply.cut("partial ans"), Reply.text("The full", " answer."))
    coord, seen = coordinator(root, server_config(server))
    await coord.fork([BranchSpec("a", "hi")], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    assert status.state == "done", status.error
    assert status.output == "The full answer."
    assert len(server.chat_requests) == 2
    assert any(isinstance(e, ev.BranchResponseRestarted) for e in seen)
    await coord.abort_fork()


async def test_stream_cut_twice_says_so(root: Path, server: ScriptedServer) -> None:
    server.push(Reply.cut("one"), Reply.cut("two"))
    coord, _ = coordinator(root, server_config(server))
    await coord.fork([BranchSpec("a", "hi")], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    assert status.state == "failed"
    assert "cut the response" in (status.error or "") and "single-slot" in (status.error or "")
    assert server.url in (status.error or "")
    await coord.abort_fork()


async def test_single_slot_interrupting_server_with_max_concurrent_requests(root: Path) -> None:
    with ScriptedServer(
        single_slot=True,
        interrupt=True,
        default=Reply("text", ["one ", "two ", "three ", "four."], delay=0.02),
    ) as srv:
        coord, _ = coordinator(root, server_config(srv, max_concurrent_requests=1))
        await coord.fork(
            [BranchSpec(n, "go") for n in ("a", "b", "c")], parent_history=[]
        )
        statuses = await coord.wait(timeout=60)
        assert [s.state for s in statuses] == ["done"] * 3, [s.error for s in statuses]
        assert srv.max_in_flight == 1 and srv.cuts == 0
        await coord.abort_fork()


# -- item 10: readable errors ----------------------------------------------------------------------
@pytest.mark.parametrize("status_code", [429, 500])
async def test_http_errors_with_a_large_body_are_one_line(
    root: Path, server: ScriptedServer, status_code: int
) -> None:
    body = json.dumps(
        {"detail": [{"loc": ["body", "messages", i], "msg": "field required", "type": "missing"}
                    for i in range(400)]}
    )
    server.push(*[Reply.error(status_code, body)] * 4)
    coord, _ = coordinator(root, server_config(server))
    await coord.fork([BranchSpec("a", "hi")], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    error = status.error or ""
    assert status.state == "failed"
    assert "\n" not in error and len(error) <= 300
    assert server.url in error and str(status_code) in error
    await coord.abort_fork()


async def test_empty_response_is_named(root: Path, server: ScriptedServer) -> None:
    server.default = Reply.text("", usage=True)
    server.default.chunks = []
    coord, _ = coordinator(root, server_config(server))
    await coord.fork([BranchSpec("a", "hi")], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    assert status.state == "failed"
    assert "empty response" in (status.error or "") and server.url in (status.error or "")
    await coord.abort_fork()


# -- item 12: response boundaries ---------------------------------------------------------------
async def test_each_response_starts_with_a_boundary_event(
    root: Path, server: ScriptedServer
) -> None:
    server.push(Reply.tool("read_file", path="a.txt"), Reply.text("Yes", ", done."))
    coord, seen = coordinator(root, server_config(server))
    await coord.fork([BranchSpec("a", "look")], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    assert status.state == "done", status.error
    starts = [e for e in seen if isinstance(e, ev.BranchResponseStarted)]
    assert [e.request for e in starts] == [1, 2]
    assert starts[0].prompts == ("look",)
    order = [type(e).__name__ for e in seen if isinstance(
        e, ev.BranchResponseStarted | ev.BranchTextDelta | ev.BranchToolCall)]
    assert order[:2] == ["BranchResponseStarted", "BranchToolCall"]
    assert order[2] == "BranchResponseStarted" and texts(seen, "a") == "Yes, done."
    await coord.abort_fork()


async def test_branch_model_without_a_resolver_uses_the_parent_models_settings(
    root: Path, server: ScriptedServer
) -> None:
    """The agent's own fork tool builds coordinators without a resolver: a branch naming
    ``openai-compatible:other`` must still reach the server the parent model was set up for."""
    from pydantic_ai import Agent

    from branching_core.agent.models import connect_model
    from branching_core.fork import ForkCoordinator
    from branching_core.workspace import Workspace

    model = connect_model(None, server_config(server), env={})
    coord = ForkCoordinator(
        Agent(model), workspace=Workspace(root, backend="copy"), default_model=model
    )
    await coord.fork([BranchSpec("a", "hi", model="openai-compatible:other")], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    assert status.state == "done", status.error
    assert server.chat_requests[-1]["model"] == "other"
    await coord.abort_fork()


async def test_interrupting_single_slot_server_without_the_limit_is_explained(root: Path) -> None:
    """What issue 14 saw (2 of 3 branches failed on llama-cpp-python): without
    max_concurrent_requests, streams are cut; each cut is retried once, and a branch that
    still fails says the server cut the response and suggests the setting."""
    with ScriptedServer(
        single_slot=True,
        interrupt=True,
        default=Reply("text", ["one ", "two ", "three ", "four."], delay=0.05),
    ) as srv:
        coord, _ = coordinator(root, server_config(srv))
        await coord.fork([BranchSpec(n, "go") for n in ("a", "b", "c")], parent_history=[])
        statuses = await coord.wait(timeout=60)
        assert srv.cuts > 0
        assert {s.state for s in statuses} <= {"done", "failed"}
        for status in statuses:
            if status.state == "failed":
                assert "cut the response" in (status.error or "")
                assert "max_concurrent_requests = 1" in (status.error or "")
        await coord.abort_fork()


async def test_stream_cut_before_its_first_chunk_is_retried(
    root: Path, server: ScriptedServer
) -> None:
    server.push(Reply("cut", [], usage=False), Reply.text("Second", " try."))
    coord, _ = coordinator(root, server_config(server))
    await coord.fork([BranchSpec("a", "hi")], parent_history=[])
    (status,) = await coord.wait(timeout=30)
    assert status.state == "done", status.error
    assert status.output == "Second try." and len(server.chat_requests) == 2
    await coord.abort_fork()


async def test_unpriced_model_aggregate_budget_falls_back_to_the_token_cap(
    root: Path, server: ScriptedServer
) -> None:
    # Only a fork-wide budget, on a model with no price: the branches' tokens count against
    # the token cap instead of the budget silently never firing (issue 14 item 7).
    server.push(Reply.endless(delay=0.005), Reply.endless(delay=0.005))
    coord, _ = coordinator(root, server_config(server, token_cap=300))
    specs = [BranchSpec("a", "hi"), BranchSpec("b", "hi")]
    await coord.fork(specs, parent_history=[], aggregate_budget_usd=1e-9)
    statuses = await coord.wait(timeout=30)
    errors = [s.error for s in statuses]
    assert {s.state for s in statuses} == {"aggregate_budget_exhausted"}, errors
    assert all("token cap 300" in (s.error or "") for s in statuses)
    await coord.abort_fork()
