"""Tool approvals: a branch pauses on a tool call that needs a person's yes, and resumes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pydantic_ai import Agent

from branching_core.fork import BranchSpec
from branching_core.fork.events import BranchApprovalRequested
from branching_core.live import ForkCoordinator, LiveForkCapability
from tests.support.typed import view_of

from .helpers import Scripted, call


def _script() -> Scripted:
    return Scripted(
        {
            "A": [call("run_command", command="echo ran > a.txt"), "A: over"],
            "B": [call("write_file", path="b.txt", content="b"), "B: over"],
        }
    )


async def test_branch_pauses_for_approval_and_runs_the_approved_call(ws, runner) -> None:
    s = _script()
    coord = ForkCoordinator(
        Agent(s.model), workspace=ws, command_runner=runner, approval_required=["run_command"]
    )
    seen: list[BranchApprovalRequested] = []
    coord.add_listener(lambda e: seen.append(e) if isinstance(e, BranchApprovalRequested) else None)
    await coord.fork([BranchSpec("a", "A"), BranchSpec("b", "B")], parent_history=[])
    await coord.wait(timeout=20)

    a, b = coord.get_branch("a"), coord.get_branch("b")
    assert a.state == "awaiting_approval" and b.state == "done"
    assert not (view_of(a) / "a.txt").exists(), "the command ran before anyone approved it"
    pending = coord.pending_approvals("a")
    assert [(c.tool_name, c.args) for c in pending] == [
        ("run_command", {"command": "echo ran > a.txt"})
    ]
    assert [e.label for e in seen] == ["a"] and seen[0].calls == tuple(pending)
    with pytest.raises(RuntimeError, match="waits for a tool approval"):
        await coord.run_on_branch("a", "more")

    await (await coord.approve("a", {pending[0].tool_call_id: True}))
    assert a.state == "done" and a.output == "A: over"
    assert (view_of(a) / "a.txt").read_text() == "ran\n"
    result = await coord.merge_or_select("pick:a")
    assert "a.txt" in result.applied_paths and (Path(ws.path) / "a.txt").exists()
    await coord.aclose()


async def test_denied_call_never_runs_and_the_model_reads_why(ws, runner) -> None:
    s = _script()
    coord = ForkCoordinator(
        Agent(s.model), workspace=ws, command_runner=runner, approval_required=True
    )
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=20)
    (pending,) = coord.pending_approvals("a")
    with pytest.raises(ValueError, match="no pending tool call"):
        await coord.approve("a", {"nope": True})
    await (await coord.approve("a", {pending.tool_call_id: "not on my machine"}))
    rt = coord.get_branch("a")
    assert rt.state == "done" and not (view_of(rt) / "a.txt").exists()
    returns = [
        p.content
        for m in s.requests_for("A")[-1]
        for p in getattr(m, "parts", [])
        if p.part_kind == "tool-return"
    ]
    assert returns == ["not on my machine"]
    with pytest.raises(RuntimeError, match="waits on no approval"):
        await coord.approve("a", {})
    await coord.aclose()


async def test_nested_fork_branches_need_approval_when_the_outer_fork_does(ws, runner) -> None:
    """15.1: nested() once re-typed the options by hand and dropped ``approval_required``."""
    s = Scripted({"A": ["A: over"], "X": [call("run_command", command="echo x > x.txt")]})
    coord = ForkCoordinator(
        Agent(s.model), workspace=ws, command_runner=runner, approval_required=["run_command"]
    )
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=20)
    inner = coord.nested("a")
    await inner.fork([BranchSpec("x", "X")], parent_history=[])
    await inner.wait(timeout=20)
    x = inner.get_branch("x")
    assert x.state == "awaiting_approval", x.status()
    assert not (view_of(x) / "x.txt").exists(), "the nested branch ran a tool nobody approved"
    assert [c.tool_name for c in inner.pending_approvals("x")] == ["run_command"]
    assert inner.options == replace(coord.options, default_model=inner.options.default_model)
    await coord.aclose()


async def test_capability_branch_runs_need_approval(project: Path, runner) -> None:
    """The capability's own workspace toolset (what branch runs use) honours approvals."""
    s = Scripted(
        {
            "P": [call("fork_run", specs=[{"label": "x", "steer": "X"}]), "P: forked"],
            "X": [call("run_command", command="echo x > x.txt")],
        }
    )
    cap = LiveForkCapability(
        workspace=project, command_runner=runner, approval_required=["run_command"]
    )
    agent = Agent(s.model, capabilities=[cap])
    await agent.run("P")
    (coord,) = cap.open_coordinators()
    await coord.wait(timeout=20)
    x = coord.get_branch("x")
    assert x.state == "awaiting_approval", x.status()
    assert not (view_of(x) / "x.txt").exists()
    await coord.aclose()
