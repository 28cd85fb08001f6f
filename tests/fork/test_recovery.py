# ruff: noqa: E501
"""Kill the process mid-fork, restart: the fork is recovered and merging it works."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest
from pydantic_ai import Agent

from branching_core.fork import ForkCoordinator, ForkStore, list_open_forks
from branching_core.fork.coordinator import INTERRUPTED
from tests.support.killed_child import run_until_ready_then_kill
from tests.support.typed import view_of

from .helpers import Scripted, user_prompts

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from branching_core.agent import LocalCommandRunner
    from branching_core.fork import BranchSpec, ForkCoordinator
    from branching_core.workspace import Workspace
    from tests.fork.helpers import Scripted, call

    async def main():
        s = Scripted({
            "A": [call("write_file", path="a.txt", content="from a"), call("run_command", command="echo sh > a-shell.txt"), call("hang")],
            "B": [call("write_file", path="b.txt", content="from b"), call("hang")],
        })
        agent = Agent(s.model)

        @agent.tool_plain
        async def hang() -> str:
            await asyncio.Event().wait()
            return "never"

        coord = ForkCoordinator(agent, workspace=Workspace(sys.argv[1]), command_runner=LocalCommandRunner())
        await coord.fork([BranchSpec("a", "A", budget_usd=5.0), BranchSpec("b", "B")],
                         parent_history=[ModelRequest(parts=[UserPromptPart("parent")])])
        while sum(rt.tool_calls for rt in coord.branches.values()) < 5:
            await asyncio.sleep(0.01)
        await coord.flush()
        print("READY", coord.fork_id, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def test_killed_process_fork_is_recovered_and_merged(project: Path) -> None:
    fork_id = run_until_ready_then_kill(CHILD, str(project))

    open_forks = list_open_forks(project)
    assert [m["fork_id"] for m in open_forks] == [fork_id]

    s = Scripted({})
    [coord] = ForkCoordinator.recover(project, Agent(s.model))
    assert coord.fork_id == fork_id and not coord.is_resolved
    statuses = {st.label: st for st in coord.inspect_branches()}
    assert {k: v.state for k, v in statuses.items()} == {"a": "terminated", "b": "terminated"}
    assert statuses["a"].error == INTERRUPTED and statuses["a"].budget_usd == 5.0
    a = coord.get_branch("a")
    assert (view_of(a) / "a.txt").read_text() == "from a" and (view_of(a) / "a-shell.txt").exists()
    assert user_prompts(a.history) == ["parent", "A"] and len(a.partial_history) >= 5
    assert not (project / "a.txt").exists()

    result = asyncio.run(coord.merge_or_select("pick:a"))
    assert result.partial and sorted(result.applied_paths) == ["a-shell.txt", "a.txt"]
    assert (project / "a.txt").read_text() == "from a" and not (project / "b.txt").exists()
    tools = [
        p.tool_name
        for m in result.history_after_merge
        for p in m.parts
        if p.part_kind == "tool-call"
    ]
    assert tools == ["write_file", "run_command"]  # the hanging call was never answered: trimmed
    assert list_open_forks(project) == []
    assert ForkCoordinator.recover(project, Agent(s.model)) == []


FORKING_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pydantic_ai import Agent
    from branching_core.agent import LocalCommandRunner
    from branching_core.fork import BranchSpec, ForkCoordinator
    from branching_core.workspace import Workspace
    from tests.fork.helpers import Scripted, call

    async def main():
        s = Scripted({"A": [call("hang")], "B": [call("hang")]})
        agent = Agent(s.model)

        @agent.tool_plain
        async def hang() -> str:
            await asyncio.Event().wait()
            return "never"

        coord = ForkCoordinator(agent, workspace=Workspace(sys.argv[1]), command_runner=LocalCommandRunner())
        await coord.fork([BranchSpec("a", "A"), BranchSpec("b", "B")], parent_history=[])
        await coord.nested("a").fork([BranchSpec("x", "X")], parent_history=[])
        print("FORKED", flush=True)

    asyncio.run(main())
    """
)


def _kill_inside_fork(project: Path, point: str) -> None:
    """Run the child with ``FORKDECK_CRASH_AT=point``: it SIGKILLs itself right there."""
    import os
    import signal
    import subprocess
    import sys

    from tests.support.killed_child import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "FORKDECK_CRASH_AT": point}
    proc = subprocess.run(
        [sys.executable, "-c", FORKING_CHILD, str(project)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("point", ["fork:intent", "fork:branches", "fork:manifest"])
def test_kill_inside_fork_leaves_no_unreferenced_durable_branch(project: Path, point: str) -> None:
    """12.12: workspace branches created before the manifest existed leaked for good."""
    from branching_core.workspace import Workspace

    _kill_inside_fork(project, point)
    # (the first fork of the child is killed at ``point``; nothing after it ran)
    coords = ForkCoordinator.recover(project, Agent(Scripted({}).model))
    referenced = {rt.workspace_branch_id for c in coords for rt in c.branches.values()}
    ws = Workspace(project)
    durable = {b.id: b.name for b in ws.list_branches() if b.durable}
    assert set(durable) <= referenced, f"leaked: {durable}"
    if point == "fork:manifest":  # the fork was complete: recovered, its branches kept
        assert len(coords) == 1 and len(durable) == 2
        assert {rt.state for rt in coords[0].branches.values()} == {"terminated"}
        asyncio.run(coords[0].abort_fork())
    else:  # never got a manifest: nothing left, not even the intent
        assert coords == [] and durable == {} and list_open_forks(project) == []
        assert not any(ForkStore(project).forks_dir.iterdir())
    assert [b for b in Workspace(project).list_branches() if b.durable] == []


def test_a_starting_app_listing_open_forks_sweeps_a_killed_fork(project: Path) -> None:
    """What the app does at start (list the open forks of its Workspace) sweeps too."""
    from branching_core.workspace import Workspace

    _kill_inside_fork(project, "fork:branches")
    ws = Workspace(project)
    assert [b for b in ws.list_branches() if b.durable], "the kill left no branch to sweep"
    assert list_open_forks(ws) == []
    assert [b for b in ws.list_branches() if b.durable] == []


# A write_file killed between its temp file and the rename leaves atomicio's temp file in
# the branch (here made by the branch's shell with the same name shape); recovery drops it,
# so merging the recovered branch never lands it in the project (issue 12 item 12).
CHILD_TORN = CHILD.replace(
    'command="echo sh > a-shell.txt"',
    'command="echo sh > a-shell.txt; printf torn > .fdtmp-0123456789ab"',
)


def test_a_torn_write_left_by_a_killed_process_is_not_merged(project: Path) -> None:
    fork_id = run_until_ready_then_kill(CHILD_TORN, str(project))
    [coord] = ForkCoordinator.recover(project, Agent(Scripted({}).model))
    assert coord.fork_id == fork_id
    assert not (view_of(coord.get_branch("a")) / ".fdtmp-0123456789ab").exists()
    result = asyncio.run(coord.merge_or_select("pick:a"))
    assert sorted(result.applied_paths) == ["a-shell.txt", "a.txt"]
    assert sorted(p.name for p in project.iterdir() if p.name != ".pydantic-deep") == [
        "README.txt", "a-shell.txt", "a.txt", "src"
    ]
