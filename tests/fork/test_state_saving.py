"""15.4: a branch's final state is saved (or the failure is shown), and closing a
coordinator never swallows its caller's cancellation."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil

import pytest
from pydantic_ai import Agent

from branching_core.fork import BranchSpec, ForkCoordinator, ForkStore

from .helpers import Scripted, call


async def test_failed_saves_are_logged_and_shown_and_do_not_skip_each_other(
    ws, project, runner, caplog
) -> None:
    s = Scripted({"A": [call("wait_a_bit"), "A: over"]})
    agent = Agent(s.model)
    gate = asyncio.Event()

    @agent.tool_plain
    async def wait_a_bit() -> str:
        await gate.wait()
        return "waited"

    coord = ForkCoordinator(agent, workspace=ws, command_runner=runner)
    handle = await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.flush()
    fork_dir = ForkStore(project).fork_dir(handle.fork_id)
    # The disk turns hostile while the branch runs: its history can no longer be written.
    shutil.rmtree(fork_dir / "history")
    (fork_dir / "history").write_text("not a directory")
    with caplog.at_level(logging.ERROR):
        gate.set()
        await coord.wait(timeout=20)
        await coord.flush()
    rt = coord.get_branch("a")
    assert rt.state == "done"
    status = rt.status()
    assert status.save_error is not None and "history" in status.save_error
    assert coord.save_errors and any("history" in r.getMessage() for r in caplog.records)
    # The manifest was still saved with the final state (the history failure skipped nothing).
    manifest = json.loads((fork_dir / "manifest.json").read_bytes())
    assert [b["state"] for b in manifest["branches"]] == ["done"]

    # Now the manifest itself cannot be written: the failure is shown, not swallowed.
    (fork_dir / "manifest.json").unlink()
    (fork_dir / "manifest.json").mkdir()
    await (await coord.run_on_branch("a", "again"))
    await coord.flush()
    assert "manifest" in (rt.status().save_error or "")
    assert any("manifest" in e for e in coord.save_errors)
    (fork_dir / "manifest.json").rmdir()
    (fork_dir / "history").unlink()
    await coord.aclose()


async def test_cancelling_the_caller_of_aclose_is_not_swallowed(ws, runner) -> None:
    s = Scripted({"A": [call("stubborn")]})
    agent = Agent(s.model)
    started = asyncio.Event()

    @agent.tool_plain
    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.5)  # slow clean-up after being told to stop
            raise
        return "never"

    coord = ForkCoordinator(agent, workspace=ws, command_runner=runner)
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await started.wait()
    task = coord.get_branch("a").task
    assert task is not None
    stopper = asyncio.create_task(coord.terminate_branch("a"))
    await asyncio.sleep(0.05)
    stopper.cancel()  # the first caller gives up waiting: the branch is still cleaning up
    with pytest.raises(asyncio.CancelledError):
        await stopper
    assert not task.done()

    closer = asyncio.create_task(coord.aclose())
    await asyncio.sleep(0.1)
    assert not closer.done(), "aclose() returned while the branch was still running"
    closer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closer
    await asyncio.wait([task])
    await coord.aclose()
    assert coord.is_resolved and coord.get_branch("a").ws_branch is None
