"""External agents as fork branches: ``BranchSpec(model="agent:...")`` through the real
``ForkCoordinator`` (a pydantic-ai ``TestModel`` agent for the chat), its events, steering,
termination and the merge path every fork uses."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from branching_core import ForkCoordinator
from branching_core.external.fork_runner import ExternalAgentRunner
from branching_core.fork import events as ev
from branching_core.fork.types import BranchSpec
from branching_core.workspace import Workspace
from tests.external.conftest import AGENT


def _coordinator(project: Path, configured: dict) -> ForkCoordinator:
    ws = Workspace(project)
    return ForkCoordinator(Agent(TestModel()), workspace=ws,
                           external_runner=ExternalAgentRunner(ws.path, configured))


def _profiles() -> dict:
    import sys

    from branching_core.config.schema import AgentProfileSettings

    return {mode: AgentProfileSettings(command=f"{sys.executable} {AGENT} {mode} {{prompt}}")
            for mode in ("fix", "break", "steer", "hang")}


async def _wait(coordinator: ForkCoordinator, timeout: float = 60) -> None:
    async def done() -> None:
        while any(s.state == "running" for s in coordinator.inspect_branches()):
            await asyncio.sleep(0.05)

    await asyncio.wait_for(done(), timeout)


def test_agent_rows_run_stream_and_merge_like_any_branch(project: Path) -> None:
    async def main() -> None:
        coordinator = _coordinator(project, _profiles())
        seen: list[ev.ForkEvent] = []
        coordinator.add_listener(seen.append)
        await coordinator.fork([BranchSpec(label="good", steer="fix it", model="agent:fix"),
                                BranchSpec(label="bad", steer="x", model="agent:break")],
                               parent_history=[])
        await _wait(coordinator)
        states = {s.label: s.state for s in coordinator.inspect_branches()}
        assert states == {"good": "done", "bad": "done"}
        lines = [e.text for e in seen if isinstance(e, ev.BranchTerminalOutput)
                 and e.label == "good"]
        assert any("\x1b[36m" in line for line in lines)  # colours kept
        report = coordinator.diff_report()
        assert {p.path for p in report.paths} >= {"calc.py", "notes.txt"}
        result = await coordinator.merge_or_select("pick:good")
        assert result is not None
        await coordinator.aclose()

    asyncio.run(main())
    assert (project / "calc.py").read_text().endswith("a + b\n")
    assert not (project / "notes.txt").exists()


def test_steer_and_terminate_an_agent_row(project: Path) -> None:
    async def main() -> None:
        coordinator = _coordinator(project, _profiles())
        await coordinator.fork([BranchSpec(label="s", steer="wait", model="agent:steer"),
                                BranchSpec(label="h", model="agent:hang", steer="tok")],
                               parent_history=[])
        for _ in range(400):
            rt = coordinator.get_branch("s")
            if rt.external is not None and any(
                    "waiting for a steer" in line for line in rt.external.lines):
                break
            await asyncio.sleep(0.05)
        assert coordinator.steer("s", "steered words") is True
        h = coordinator.get_branch("h")
        status = await coordinator.terminate_branch(h.branch_id)
        assert status.state == "terminated"
        await _wait(coordinator)
        s = coordinator.get_branch("s")
        assert s.state == "done"
        assert (Path(s.ws_branch.path) / "steered.txt").read_text().strip() == "steered words"
        with pytest.raises(RuntimeError):
            coordinator.steer("h", "too late")
        await coordinator.aclose()

    asyncio.run(main())


def test_an_agent_that_reads_no_input_says_it_cannot_be_steered(project: Path) -> None:
    import sys

    from branching_core.config.schema import AgentProfileSettings

    quiet = {"quiet": AgentProfileSettings(command=f"{sys.executable} {AGENT} hang {{prompt}}",
                                           steer=False)}

    async def main() -> None:
        coordinator = _coordinator(project, quiet)
        await coordinator.fork([BranchSpec(label="q", steer="tok-quiet", model="agent:quiet")],
                               parent_history=[])
        rt = coordinator.get_branch("q")
        for _ in range(400):
            if rt.external is not None:
                break
            await asyncio.sleep(0.05)
        with pytest.raises(RuntimeError, match="cannot be steered"):
            coordinator.steer("q", "hello")
        await coordinator.terminate_branch(rt.branch_id)
        await coordinator.aclose()

    asyncio.run(main())
