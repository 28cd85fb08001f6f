"""ForkCoordinator driven programmatically, with real Agents on FunctionModels."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from branching_core.fork import (
    BranchSpec,
    BranchStateChanged,
    BranchToolCall,
    CheckpointStore,
    ForkBranchLimitError,
    ForkDepthLimitError,
    ForkStore,
    trim_unanswered_tool_calls,
)
from branching_core.fork.history import load_history
from branching_core.live import ForkCoordinator
from tests.support.typed import view_of

from .helpers import Scripted, call, request_text, user_prompts


def test_trim_unanswered_tool_calls() -> None:
    history = [
        ModelRequest(parts=[UserPromptPart("go")]),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": "x"}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("read_file", "x!", tool_call_id="c1")]),
        ModelResponse(parts=[TextPart("forking"), ToolCallPart("fork_run", {}, tool_call_id="c2")]),
    ]
    trimmed = trim_unanswered_tool_calls(history)
    assert len(trimmed) == 4
    assert [p.part_kind for p in trimmed[-1].parts] == ["text"]
    assert [p.part_kind for p in history[-1].parts] == ["text", "tool-call"]  # input untouched
    only_call = [
        *history[:3],
        ModelResponse(parts=[ToolCallPart("fork_run", {}, tool_call_id="c3")]),
    ]
    assert len(trim_unanswered_tool_calls(only_call)) == 3
    orphan = [ModelRequest(parts=[ToolReturnPart("x", "y", tool_call_id="zz")])]
    assert trim_unanswered_tool_calls(orphan) == []


async def test_fork_runs_branches_in_isolation_and_merges_winner(ws, project: Path, runner) -> None:
    s = Scripted(
        {
            "A": [
                call("write_file", path="a.txt", content="from a"),
                call("delete_file", path="README.txt"),
            ],
            "B": [
                call("write_file", path="b.txt", content="from b"),
                call("write_file", path="src/app.py", content="VALUE = 2\n"),
            ],
        }
    )
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
    events = coord.subscribe()
    parent_history = [
        ModelRequest(parts=[UserPromptPart("parent task")]),
        ModelResponse(parts=[ToolCallPart("fork_run", {}, tool_call_id="f1")]),
    ]
    handle = await coord.fork(
        [BranchSpec("a", "A"), BranchSpec("b", "B")], parent_history=parent_history
    )
    assert handle.fork_id == coord.fork_id and len(handle.branches) == 2
    statuses = await coord.wait(timeout=20)
    assert {s.label: s.state for s in statuses} == {"a": "done", "b": "done"}

    # Each branch got the parent's history (unanswered fork_run call trimmed) plus its steer.
    first_a = s.requests_for("A")[0]
    assert user_prompts(first_a) == ["parent task", "A"]
    assert not any(isinstance(p, ToolCallPart) for m in first_a for p in m.parts)
    # Nothing reached the parent while the fork is open; each branch sees only its own files.
    assert not (project / "a.txt").exists() and not (project / "b.txt").exists()
    a, b = coord.get_branch("a"), coord.get_branch("b")
    assert (view_of(a) / "a.txt").exists() and not (view_of(a) / "b.txt").exists()
    assert not (view_of(b) / "a.txt").exists()
    assert {c.path for c in coord.file_changes("a")} == {"a.txt", "README.txt"}
    report = coord.diff()
    assert {p["path"] for p in report["paths"]} == {"a.txt", "b.txt", "README.txt", "src/app.py"}

    result = await coord.merge_or_select("pick:a")
    assert result.winner_label == "a" and result.winner_state == "done" and not result.partial
    assert result.applied_paths == ["a.txt"] and result.deleted_paths == ["README.txt"]
    assert result.conflicts == [] and result.errors == []
    assert result.discarded_branch_ids == [b.branch_id]
    assert (project / "a.txt").read_text() == "from a"
    assert not (project / "README.txt").exists()
    assert (
        not (project / "b.txt").exists() and (project / "src/app.py").read_text() == "VALUE = 1\n"
    )
    assert user_prompts(result.history_after_merge)[:2] == ["parent task", "A"]
    assert coord.is_resolved and b.resolution == "discarded" and a.resolution == "merged"

    seen = []
    while not events.empty():
        seen.append(events.get_nowait())
    assert any(isinstance(e, BranchToolCall) and e.tool_name == "write_file" for e in seen)
    assert any(isinstance(e, BranchStateChanged) and e.state == "done" for e in seen)

    manifest = ForkStore(project).read_manifest(handle.fork_id)
    assert manifest is not None
    assert manifest["resolved"] and manifest["resolution"] == f"pick:{a.branch_id}"

    # Rewinding to fork:<id> restores the files too (seed 003 could not); post-fork redoes them.
    history = await coord.rewind_to_checkpoint(f"fork:{handle.fork_id}")
    assert (project / "README.txt").read_text() == "hello\n" and not (project / "a.txt").exists()
    assert user_prompts(history) == ["parent task"]
    await coord.flush()  # post-fork files are recorded in a worker thread
    assert result.post_fork_checkpoint_id is not None
    history = CheckpointStore(ForkStore(project)).rewind(result.post_fork_checkpoint_id)
    assert (project / "a.txt").read_text() == "from a" and not (project / "README.txt").exists()
    assert user_prompts(history)[:2] == ["parent task", "A"]


async def test_each_branch_calls_its_own_model(ws, runner) -> None:
    default = Scripted({}, name="default")
    ma = Scripted({"A": [call("write_file", path="x.txt", content="a")]}, name="model-a")
    mb = Scripted({"B": [call("write_file", path="x.txt", content="b")]}, name="model-b")
    models = {"test:a": ma.model, "test:b": mb.model}
    coord = ForkCoordinator(
        Agent(default.model), workspace=ws, command_runner=runner, model_resolver=models.__getitem__
    )
    await coord.fork(
        [
            BranchSpec("a", "A", model="test:a"),
            BranchSpec("b", "B", model="test:b", extra_instructions="Be brief."),
        ],
        parent_history=[],
    )
    await coord.wait(timeout=20)
    assert default.calls == []
    assert len(ma.calls) == 2 and {k for k, _ in ma.calls} == {"A"}
    assert len(mb.calls) == 2 and {k for k, _ in mb.calls} == {"B"}
    # extra_instructions reached branch b's requests only
    assert any(
        "Be brief." in (m.instructions or "") for m in mb.calls[0][1] if isinstance(m, ModelRequest)
    )
    assert not any(
        "Be brief." in (m.instructions or "") for m in ma.calls[0][1] if isinstance(m, ModelRequest)
    )
    assert (view_of(coord.get_branch("a")) / "x.txt").read_text() == "a"
    assert (view_of(coord.get_branch("b")) / "x.txt").read_text() == "b"
    await coord.aclose()


async def test_steer_reaches_only_that_branch_next_request(ws) -> None:
    gates = {"A": asyncio.Event(), "B": asyncio.Event()}
    waiting = {"A": asyncio.Event(), "B": asyncio.Event()}
    s = Scripted({"A": [call("pause", key="A"), "after"], "B": [call("pause", key="B"), "after"]})
    agent = Agent(s.model)

    @agent.tool_plain
    async def pause(key: str) -> str:
        waiting[key].set()
        await gates[key].wait()
        return "resumed"

    coord = ForkCoordinator(agent, workspace=ws, provide_workspace_tools=False)
    await coord.fork([BranchSpec("a", "A"), BranchSpec("b", "B")], parent_history=[])
    await asyncio.wait_for(asyncio.gather(waiting["A"].wait(), waiting["B"].wait()), 10)
    assert coord.steer("a", "STEER-FOR-A") is True
    gates["A"].set()
    gates["B"].set()
    await coord.wait(timeout=20)
    a_requests, b_requests = s.requests_for("A"), s.requests_for("B")
    assert "STEER-FOR-A" not in request_text(a_requests[0])
    assert "STEER-FOR-A" in request_text(a_requests[1])  # the very next request
    assert all("STEER-FOR-A" not in request_text(m) for m in b_requests)
    with pytest.raises(RuntimeError):
        coord.steer("a", "too late")
    await coord.aclose()


async def test_budget_stops_branch_between_two_tool_calls_and_it_stays_mergeable(
    ws, project, runner
) -> None:
    s = Scripted(
        {
            "A": [
                call("write_file", path="one.txt", content="1"),
                call("write_file", path="two.txt", content="2"),
            ],
            "B": [call("write_file", path="b.txt", content="b")],
        }
    )
    coord = ForkCoordinator(
        Agent(s.model), workspace=ws, command_runner=runner, price_fn=lambda response: 0.01
    )
    await coord.fork(
        [BranchSpec("a", "A", budget_usd=0.015), BranchSpec("b", "B")], parent_history=[]
    )
    await coord.wait(timeout=20)
    a, b = coord.get_branch("a"), coord.get_branch("b")
    assert a.state == "budget_exhausted" and b.state == "done"
    assert a.meter.requests == 2 and a.meter.cost_usd == pytest.approx(0.02)
    # the 2nd call never ran
    assert (view_of(a) / "one.txt").exists() and not (view_of(a) / "two.txt").exists()
    cost = coord.fork_cost()
    assert cost.aggregate_usd == pytest.approx(0.04)
    result = await coord.merge_or_select("pick:a")
    assert result.partial and result.winner_state == "budget_exhausted"
    assert result.applied_paths == ["one.txt"]
    assert (project / "one.txt").read_text() == "1" and not (project / "b.txt").exists()
    # the partial history ends before the unanswered second call
    calls = [p for m in result.history_after_merge for p in m.parts if isinstance(p, ToolCallPart)]
    assert [c.args_as_dict()["path"] for c in calls] == ["one.txt"]


async def test_budget_priced_by_genai_prices(ws, runner) -> None:
    # FunctionModel named like a real model: pydantic-ai prices it through genai-prices.
    s = Scripted(
        {
            "A": [
                call("write_file", path="one.txt", content="1"),
                call("write_file", path="two.txt", content="2"),
            ]
        },
        name="gpt-4o",
    )
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
    await coord.fork([BranchSpec("a", "A", budget_usd=1e-7)], parent_history=[])
    await coord.wait(timeout=20)
    a = coord.get_branch("a")
    assert a.state == "budget_exhausted" and a.meter.requests == 1
    assert a.meter.cost_usd > 0
    assert not (view_of(a) / "one.txt").exists()
    await coord.merge_or_select("abort")


async def test_aggregate_budget_stops_every_running_branch(ws, runner) -> None:
    gate = asyncio.Event()
    s = Scripted(
        {
            "A": [
                call("write_file", path="a.txt", content="a"),
                call("write_file", path="a2.txt", content="a"),
            ],
            "B": [call("pause"), call("write_file", path="b.txt", content="b")],
        }
    )
    agent = Agent(s.model)

    @agent.tool_plain
    async def pause() -> str:
        await gate.wait()
        return "ok"

    coord = ForkCoordinator(agent, workspace=ws, command_runner=runner, price_fn=lambda r: 0.01)
    await coord.fork(
        [BranchSpec("a", "A"), BranchSpec("b", "B")], parent_history=[], aggregate_budget_usd=0.025
    )
    statuses = await coord.wait(timeout=20)
    assert {s.label: s.state for s in statuses} == {
        "a": "aggregate_budget_exhausted",
        "b": "aggregate_budget_exhausted",
    }
    assert coord.fork_cost().aggregate_usd == pytest.approx(0.03)
    await coord.aclose()


async def test_terminate_limits_and_abort(ws, project, runner) -> None:
    gate = asyncio.Event()
    s = Scripted({"A": [call("write_file", path="a.txt", content="a"), call("pause")]})
    agent = Agent(s.model)

    @agent.tool_plain
    async def pause() -> str:
        await gate.wait()
        return "ok"

    coord = ForkCoordinator(agent, workspace=ws, command_runner=runner, max_branches=2, max_depth=1)
    with pytest.raises(ForkBranchLimitError):
        await coord.fork([BranchSpec(x, x) for x in "abc"], parent_history=[])
    with pytest.raises(ValueError):
        await coord.fork([BranchSpec("a", "A"), BranchSpec("a", "A")], parent_history=[])
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    while coord.get_branch("a").tool_calls < 2:
        await asyncio.sleep(0.01)
    status = await coord.terminate_branch("a")
    assert status.state == "terminated"
    assert (await coord.terminate_branch("a")).state == "terminated"  # idempotent
    with pytest.raises(ForkDepthLimitError):
        await coord.nested("a").fork([BranchSpec("x", "X")], parent_history=[])
    ws_branch = coord.get_branch("a").ws_branch
    ids = await coord.abort_fork()
    assert ids == [coord.get_branch("a").branch_id] and coord.is_resolved
    assert not ws_branch.is_open and not (project / "a.txt").exists()
    assert await coord.abort_fork() == []


async def test_conflicting_path_is_reported_never_overwritten(ws, project, runner) -> None:
    s = Scripted(
        {
            "A": [
                call("write_file", path="src/app.py", content="VALUE = 3\n"),
                call("write_file", path="new.txt", content="n"),
            ]
        }
    )
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=20)
    (project / "src/app.py").write_text("VALUE = 99\n")  # someone else changed it meanwhile
    result = await coord.merge_or_select("pick:a")
    assert result.conflicts == ["src/app.py"]
    assert result.applied_paths == ["new.txt"]
    assert (project / "src/app.py").read_text() == "VALUE = 99\n"
    assert (project / "new.txt").read_text() == "n"


async def test_run_on_branch_continues_a_finished_branch(ws, runner) -> None:
    s = Scripted(
        {
            "A": [call("write_file", path="a.txt", content="a")],
            "MORE": [call("write_file", path="more.txt", content="m")],
        }
    )
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=20)
    task = await coord.run_on_branch("a", "MORE")
    await task
    await coord.flush()
    rt = coord.get_branch("a")
    assert rt.state == "done" and (view_of(rt) / "more.txt").exists()
    assert user_prompts(s.requests_for("MORE")[0]) == ["A", "MORE"]
    assert coord.fork_id is not None
    persisted = load_history(ForkStore(ws.path).read_history(coord.fork_id, rt.branch_id))
    assert user_prompts(persisted) == ["A", "MORE"]
    manifest = json.loads(
        (ws.path / ".pydantic-deep/forks" / coord.fork_id / "manifest.json").read_text()
    )
    assert manifest["branches"][0]["turns"] == 2
    await coord.aclose()
