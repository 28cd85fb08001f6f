"""coord.process_report(): real branch runs (pydantic-ai Agents on FunctionModels) in real
workspaces; the steps come from the branches' own message histories."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse

from branching_core.fork import BranchSpec, ForkCoordinator, MergeStrategy
from branching_core.review import resolve
from branching_core.review.process_report import SUMMARY_CHARS, build_process_report
from branching_core.workspace import Workspace
from tests.review.forks import JudgeScript, verdict

from .conftest import project, runner, ws
from .helpers import Scripted, Step, call

__all__ = ["project", "runner", "ws"]


SCRIPTS: dict[str, list[Step]] = {
    "careful": [
        call("read_file", path="src/app.py"),
        call("write_file", path="src/app.py", content="VALUE = 2\n"),
    ],
    "hasty": [
        call("read_file", path="src/app.py"),
        call("no_such_tool", path="src/app.py"),
        call("write_file", path="src/app.py", content="VALUE = 3\n"),
    ],
}


async def _fork(ws: Workspace, price_fn=None) -> ForkCoordinator:
    scripted = Scripted({f"do {label}": steps for label, steps in SCRIPTS.items()})
    kwargs = {"price_fn": price_fn} if price_fn is not None else {}
    coord = ForkCoordinator(Agent(scripted.model), workspace=ws, **kwargs)
    await coord.fork([BranchSpec(label, f"do {label}") for label in SCRIPTS], parent_history=[])
    await coord.wait(timeout=30)
    return coord


async def test_steps_status_and_divergence(ws: Workspace) -> None:
    coord = await _fork(ws, price_fn=lambda response: 0.01)
    report = coord.process_report()
    careful, hasty = report.steps["careful"], report.steps["hasty"]
    assert [(s.tool, s.status) for s in careful] == [
        ("read_file", "success"),
        ("write_file", "success"),
    ]
    assert [(s.tool, s.status) for s in hasty] == [
        ("read_file", "success"),
        ("no_such_tool", "retried"),
        ("write_file", "success"),
    ]
    # same first call (same tool, same arguments), then different
    assert report.diverged_at == 1
    assert careful[0].key == hasty[0].key and careful[1].key != hasty[1].key
    assert careful[0].args == "path='src/app.py'"
    assert all(s.duration_s is not None and s.duration_s >= 0 for s in careful + hasty)
    # each response made one call and cost 0.01
    assert report.totals("hasty")["cost_usd"] == 0.03
    assert report.totals("hasty")["retried"] == 1
    rows = report.rows()
    assert len(rows) == 3 and rows[2]["careful"] is None and rows[2]["hasty"] is not None
    await coord.abort_fork()


async def test_same_calls_with_different_content_diverge(ws: Workspace) -> None:
    """The full arguments are compared, not the display summary (long values are cut)."""
    long_a, long_b = "x" * 200 + "a", "x" * 200 + "b"
    scripted = Scripted(
        {
            "do a": [call("write_file", path="f.txt", content=long_a)],
            "do b": [call("write_file", path="f.txt", content=long_b)],
        }
    )
    coord = ForkCoordinator(Agent(scripted.model), workspace=ws)
    await coord.fork([BranchSpec("a", "do a"), BranchSpec("b", "do b")], parent_history=[])
    await coord.wait(timeout=30)
    report = coord.process_report()
    assert report.steps["a"][0].args == report.steps["b"][0].args  # the summaries look alike
    assert report.diverged_at == 0
    await coord.abort_fork()


async def test_identical_runs_and_unknown_cost(ws: Workspace) -> None:
    steps: list[Step] = [call("read_file", path="src/app.py")]
    scripted = Scripted({"do a": steps, "do b": steps})
    coord = ForkCoordinator(Agent(scripted.model), workspace=ws, price_fn=lambda r: None)
    await coord.fork([BranchSpec("a", "do a"), BranchSpec("b", "do b")], parent_history=[])
    await coord.wait(timeout=30)
    report = coord.process_report()
    assert report.diverged_at is None
    assert report.totals("a")["cost_usd"] is None
    text = report.summary()
    assert text.startswith(
        "Every branch made the same 1 tool call(s): read_file(path='src/app.py')"
    )
    assert "cost unknown" in text
    await coord.abort_fork()


async def test_parent_history_is_not_counted(ws: Workspace) -> None:
    """Tool calls the parent made before the fork are not the branches' work."""
    scripted = Scripted({"do a": [call("read_file", path="README.txt")]})
    parent = await Agent(scripted.model).run("do a")
    coord = ForkCoordinator(Agent(scripted.model), workspace=ws)
    await coord.fork([BranchSpec("b", "go on")], parent_history=parent.all_messages())
    await coord.wait(timeout=30)
    report = coord.process_report()
    assert report.steps["b"] == []
    await coord.abort_fork()


def test_summary_is_bounded() -> None:
    class Rt:
        def __init__(self, label: str, n: int) -> None:
            from pydantic_ai.messages import ModelRequest, ToolCallPart, ToolReturnPart

            self.label, self.seed_history, self.history = label, [], []
            for i in range(n):
                part = ToolCallPart("write_file", {"path": f"{label}/{i}.py", "content": "y" * 500})
                self.history.append(ModelResponse(parts=[part]))
                self.history.append(
                    ModelRequest(parts=[ToolReturnPart("write_file", "ok", part.tool_call_id)])
                )

    report = build_process_report([Rt(f"b{i}", 200) for i in range(5)])
    assert sum(len(s) for s in report.steps.values()) == 1000
    assert len(report.summary()) <= SUMMARY_CHARS
    assert len(report.summary(300)) <= 300


async def test_the_judge_sees_the_process_summary(ws: Workspace) -> None:
    coord = await _fork(ws)
    judge = JudgeScript([verdict("careful", 0.5)])
    outcome = await resolve(coord, MergeStrategy(kind="auto_with_fallback"), judges=[judge.model])
    prompt = judge.prompts[0]
    assert "## How each branch worked" in prompt
    assert "Shared first 1 step(s): read_file(path='src/app.py')" in prompt
    assert "no_such_tool(path='src/app.py') retried" in prompt
    assert outcome.process is not None and outcome.process.diverged_at == 1
    await coord.abort_fork()


@pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")
def test_statuses_from_typed_parts() -> None:
    """failed / denied come from ToolReturnPart.outcome, a legacy RetryPromptPart is a
    retry, a call nobody answered is pending; durations come from the timestamps."""
    from datetime import UTC, datetime, timedelta

    from pydantic_ai.messages import ModelRequest, RetryPromptPart, ToolCallPart, ToolReturnPart

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    calls = [ToolCallPart("run_command", {"command": f"step {i}"}, f"c{i}") for i in range(4)]
    history = [
        ModelResponse(parts=calls[:3], timestamp=t0),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    "run_command",
                    "boom",
                    "c0",
                    outcome="failed",
                    timestamp=t0 + timedelta(seconds=2),
                ),
                ToolReturnPart("run_command", "no", "c1", outcome="denied", timestamp=t0),
                RetryPromptPart(
                    "bad args", tool_name="run_command", tool_call_id="c2", timestamp=t0
                ),
            ]
        ),
        ModelResponse(parts=[calls[3]], timestamp=t0),
    ]

    recorded = history

    class Rt:
        label, seed_history = "x", []
        history = recorded

    report = build_process_report([Rt()])
    steps = report.steps["x"]
    assert [s.status for s in steps] == ["failed", "denied", "retried", "pending"]
    assert steps[0].duration_s == 2.0 and steps[3].duration_s is None
    assert report.totals("x")["failed"] == 2
    assert "run_command(command='step 0') failed" in report.summary()
