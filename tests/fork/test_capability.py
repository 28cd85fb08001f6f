"""LiveForkCapability: the agent drives the fork itself through its tools."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import RetryPromptPart, ToolReturnPart

from branching_core.agent import LocalCommandRunner
from branching_core.live import ForkCoordinator, LiveForkCapability
from branching_core.sandbox import sandbox_available

from .helpers import Scripted, call, user_prompts


@dataclass
class Deps:
    fork_coordinator: Any = None


def parent_script(label: str, steer: str) -> list[Any]:
    return [
        call("fork_run", specs=[{"label": label, "steer": steer}]),
        call("wait_branches", timeout=30),
        call("merge_or_select", action=f"pick:{label}"),
    ]


async def test_concurrent_parent_runs_never_share_a_coordinator(project: Path, runner) -> None:
    s = Scripted(
        {
            "P1": parent_script("x", "X1"),
            "P2": parent_script("x", "X2"),
            "X1": [call("write_file", path="one.txt", content="1")],
            "X2": [call("write_file", path="two.txt", content="2")],
        }
    )
    cap = LiveForkCapability(workspace=project, command_runner=runner)
    agent = Agent(s.model, capabilities=[cap])
    d1, d2 = Deps(), Deps()
    r1, r2 = await asyncio.gather(agent.run("P1", deps=d1), agent.run("P2", deps=d2))
    c1, c2 = d1.fork_coordinator, d2.fork_coordinator
    assert isinstance(c1, ForkCoordinator) and isinstance(c2, ForkCoordinator)
    assert c1 is not c2 and c1.fork_id != c2.fork_id
    assert c1.is_resolved and c2.is_resolved
    # each branch saw its own parent's conversation only
    assert user_prompts(s.requests_for("X1")[0]) == ["P1", "X1"]
    assert user_prompts(s.requests_for("X2")[0]) == ["P2", "X2"]
    # both merges landed (the second fork's branch is stale after the first commit:
    # it is applied path by path)
    assert (project / "one.txt").read_text() == "1" and (project / "two.txt").read_text() == "2"
    assert r1.output == "P1: finished" and r2.output == "P2: finished"
    assert cap.open_coordinators() == []


async def test_unresolved_fork_is_preserved_for_the_next_turn(project: Path, runner) -> None:
    s = Scripted(
        {
            "T1": [
                call("fork_run", specs=[{"label": "a", "steer": "A"}]),
                call("wait_branches", timeout=30),
            ],
            "T2": [call("inspect_branches"), call("merge_or_select", action="pick:a")],
            "A": [call("write_file", path="a.txt", content="a")],
        }
    )
    cap = LiveForkCapability(workspace=project, command_runner=runner)
    agent = Agent(s.model, capabilities=[cap])
    deps = Deps()
    await agent.run("T1", deps=deps)
    first = deps.fork_coordinator
    assert first.fork_id and not first.is_resolved and cap.open_coordinators() == [first]
    await agent.run("T2", deps=deps)
    assert deps.fork_coordinator is first and first.is_resolved
    assert (project / "a.txt").read_text() == "a"


async def test_nested_fork_merges_up_two_levels(project: Path, runner) -> None:
    s = Scripted(
        {
            "ROOT": parent_script("outer", "OUTER"),
            "OUTER": [
                call("write_file", path="outer.txt", content="o"),
                *parent_script("inner", "INNER"),
            ],
            "INNER": [call("write_file", path="deep/inner.txt", content="i")],
        }
    )
    cap = LiveForkCapability(workspace=project, command_runner=runner)
    agent = Agent(s.model, capabilities=[cap])
    deps = Deps()
    result = await agent.run("ROOT", deps=deps)
    assert result.output == "ROOT: finished"
    assert (project / "outer.txt").read_text() == "o"
    assert (project / "deep/inner.txt").read_text() == "i"
    outer = deps.fork_coordinator.get_branch("outer")
    inner_coord = outer.child
    assert inner_coord is not None and inner_coord.is_resolved and inner_coord.depth == 1
    assert inner_coord.get_branch("inner").depth == 2
    assert user_prompts(s.requests_for("INNER")[0]) == ["ROOT", "OUTER", "INNER"]


async def test_fork_depth_limit_is_a_tool_failure_the_model_reads(project: Path, runner) -> None:
    s = Scripted(
        {
            "ROOT": parent_script("outer", "OUTER"),
            "OUTER": [call("fork_run", specs=[{"label": "inner", "steer": "INNER"}])],
        }
    )
    agent = Agent(
        s.model,
        capabilities=[LiveForkCapability(workspace=project, command_runner=runner, max_depth=1)],
    )
    await agent.run("ROOT", deps=Deps())
    outer_second = s.requests_for("OUTER")[1]
    failed = [
        p
        for m in outer_second
        for p in m.parts
        if p.part_kind in ("tool-return", "retry-prompt", "retry-feedback")
    ]
    assert any("max_depth" in str(getattr(p, "content", "")) for p in failed)


async def test_shell_command_in_one_branch_is_invisible_to_sibling_and_parent(
    project: Path,
) -> None:
    # The real sandbox when this machine can run one (the capability's default runner),
    # else plain subprocesses in the branch directory.
    runner = None if sandbox_available()[0] else LocalCommandRunner()
    proceed = asyncio.Event()
    s = Scripted(
        {
            "ROOT": [
                call(
                    "fork_run", specs=[{"label": "w", "steer": "W"}, {"label": "r", "steer": "R"}]
                ),
                call("wait_branches", timeout=60),
                call("merge_or_select", action="pick:w"),
            ],
            "W": [call("run_command", command="echo made-by-shell > shell.txt && rm README.txt")],
            "R": [
                call("wait_for_writer"),
                call("run_command", command="ls; cat shell.txt || echo NOFILE"),
            ],
        }
    )
    cap = LiveForkCapability(workspace=project, command_runner=runner)
    agent = Agent(s.model, capabilities=[cap])
    seen_by_parent: list[bool] = []

    @agent.tool_plain
    async def wait_for_writer() -> str:
        await asyncio.wait_for(proceed.wait(), 60)
        return "go"

    deps = Deps()
    run_task = asyncio.create_task(agent.run("ROOT", deps=deps))
    while deps.fork_coordinator is None or deps.fork_coordinator.fork_id is None:
        await asyncio.sleep(0.01)
    coord = deps.fork_coordinator
    await coord.wait(timeout=60, branch_ids=["w"])
    seen_by_parent.append((project / "shell.txt").exists())
    proceed.set()
    await run_task
    r_results = [
        str(p.content) for m in s.requests_for("R")[-1] for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    assert "NOFILE" in r_results[-1] and "README.txt" in r_results[-1]
    assert seen_by_parent == [False]
    assert (project / "shell.txt").read_text() == "made-by-shell\n"
    assert not (project / "README.txt").exists()


async def test_fork_run_isolation_values_are_checked_at_the_tool_boundary(
    project: Path, runner
) -> None:
    s = Scripted(
        {
            "ROOT": [
                call("fork_run", specs=[{"label": "a", "steer": "A"}], isolation={"backend": "x"}),
                *parent_script("a", "A"),
            ],
            "A": [call("write_file", path="a.txt", content="a")],
        }
    )
    cap = LiveForkCapability(workspace=project, command_runner=runner)
    await Agent(s.model, capabilities=[cap]).run("ROOT", deps=Deps())
    answer = [
        str(p.content)
        for m in s.requests_for("ROOT")[1]
        for p in m.parts
        if isinstance(p, ToolReturnPart | RetryPromptPart)
    ]
    # the model is told which value is wrong (before: "x" was passed on unchecked)
    assert answer and "literal_error" in answer[0] and "backend" in answer[0]
    assert (project / "a.txt").read_text() == "a"  # the corrected call forked and landed
