"""Every way a fork ends goes through one ``ForkState.settle``: the resolution, its time,
the durable manifest, the retention policy and the ``ForkResolved`` event are the same
for a pick, a combine, an abort and the judge's auto-merge.

Before (issue 23): ``fork/combine.py:merge_combined`` copied the end-of-merge steps of a
pick and skipped two of them: a combined fork had no ``resolved_at`` in its manifest
(retention then dated it by its files) and the retention policy never ran after it.
Real forks (pydantic-ai Agents on FunctionModels writing through the workspace tools) in
a real copy-on-write workspace.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from branching_core.fork import ForkStore
from branching_core.fork import events as ev
from branching_core.fork.actions import MergeAction
from branching_core.fork.coordinator import ForkCoordinator
from branching_core.fork.state import Resolution
from branching_core.live import ForkCoordinator as LiveForkCoordinator
from branching_core.workspace import Workspace
from tests.review.forks import JudgeScript, call, fork_with, verdict

from .conftest import project, runner, ws

__all__ = ["project", "runner", "ws"]

ENDINGS = ["pick", "combine", "abort", "auto"]


async def _action(coord: ForkCoordinator, ending: str) -> Any:
    if ending == "pick":
        return await coord.merge_or_select(MergeAction.pick("a"))
    if ending == "combine":
        return await coord.merge_or_select(MergeAction.combine({"a.txt": "a", "b.txt": "b"}))
    if ending == "abort":
        return await coord.merge_or_select(MergeAction.abort())
    judge = JudgeScript([verdict("a", confidence=0.99)])
    return await coord.merge_or_select("auto", judges=[judge.model], test_command="")


async def _fork(ws: Workspace) -> ForkCoordinator:
    return await fork_with(
        ws,
        {
            "a": [call("write_file", path="a.txt", content="from a\n")],
            "b": [call("write_file", path="b.txt", content="from b\n")],
        },
    )


@pytest.mark.parametrize("ending", ENDINGS)
async def test_every_ending_records_the_same_settlement(
    ws: Workspace, project: Path, ending: str
) -> None:
    coord = await _fork(ws)
    fork_id = coord.fork_id
    assert fork_id is not None
    events: list[ev.ForkEvent] = []
    coord.add_listener(events.append)
    before = time.time()
    await _action(coord, ending)
    await coord.flush()

    manifest = ForkStore(project).read_manifest(fork_id)
    assert manifest is not None
    assert manifest["resolved"] is True
    assert manifest["resolved_at"] is not None and manifest["resolved_at"] >= before
    resolved = [e for e in events if isinstance(e, ev.ForkResolved)]
    assert len(resolved) == 1, "one ForkResolved per fork, whatever ended it"
    assert resolved[0].action == manifest["resolution"]
    kind = "pick" if ending == "auto" else ending
    recorded = Resolution.from_record(manifest["resolution"])
    assert recorded is not None and recorded.kind == kind
    assert coord.is_resolved
    assert all(rt.ws_branch is None for rt in coord.branches.values())
    if ending == "abort":
        assert not (project / "a.txt").exists() and not (project / "b.txt").exists()
    else:
        assert (project / "a.txt").read_text() == "from a\n"


@pytest.mark.parametrize("ending", ENDINGS)
async def test_every_ending_applies_the_retention_policy(
    project: Path, runner: Any, ending: str
) -> None:
    """``keep_resolved = 1`` in the settings: after the second fork settles (whatever
    ended it), the first resolved fork's directory is gone."""
    (project / ".pydantic-deep").mkdir(exist_ok=True)
    (project / ".pydantic-deep" / "config.toml").write_text("[fork]\nkeep_resolved = 1\n")
    ws = Workspace(project)
    store = ForkStore(project)
    first = await _fork(ws)
    first_id = first.fork_id
    await first.merge_or_select("abort")
    await first.flush()
    assert store.fork_dir(str(first_id)).exists()

    second = await _fork(ws)
    await _action(second, ending)
    await second.flush()
    assert not store.fork_dir(str(first_id)).exists(), f"{ending} did not prune"
    assert store.fork_dir(str(second.fork_id)).exists()


def test_resolution_reads_what_older_states_wrote() -> None:
    """The manifest keeps the strings older versions wrote (``pick:<id>``, ``combine:<id>``,
    ``abort``); a ``Resolution`` reads them and writes them back unchanged."""
    for text in ("pick:abc-0-1234", "combine:abc-1-5678", "abort"):
        res = Resolution.from_record(text)
        assert str(res) == text
    picked = Resolution.from_record("pick:abc-0-1234")
    assert picked is not None and picked.branch_id == "abc-0-1234"
    assert Resolution.from_record(None) is None


async def test_live_coordinator_is_the_engine_one(ws: Workspace) -> None:
    """The facade keeps its public surface (the live subclass only adds the review)."""
    coord = await _fork(ws)
    assert isinstance(coord, LiveForkCoordinator)
    await coord.aclose()


@pytest.mark.parametrize("ending", ["pick", "combine", "abort"])
async def test_a_recovered_fork_settles_like_any_other(
    ws: Workspace, project: Path, ending: str
) -> None:
    """A restart rebuilds the fork from its manifest (``ForkState.restore``); ending it
    then runs the same settlement (resolution, its time, one event)."""
    first = await _fork(ws)
    fork_id = first.fork_id
    await first.flush()
    [coord] = LiveForkCoordinator.recover(ws, first.agent)
    assert coord.fork_id == fork_id and not coord.is_resolved
    events: list[ev.ForkEvent] = []
    coord.add_listener(events.append)
    await _action(coord, ending)
    await coord.flush()
    manifest = ForkStore(project).read_manifest(str(fork_id))
    assert manifest is not None and manifest["resolved"] and manifest["resolved_at"]
    assert [e.action for e in events if isinstance(e, ev.ForkResolved)] == [
        manifest["resolution"]
    ]
    assert LiveForkCoordinator.recover(ws, first.agent) == []
    for rt in first.branches.values():  # the first process's tasks ended before the restart
        assert rt.task is not None and rt.task.done()


@pytest.mark.parametrize("ending", ENDINGS)
async def test_a_fork_is_over_only_once_every_end_step_ran(ws: Workspace, ending: str) -> None:
    """``is_resolved`` (the app's ``fork_active``) turns true only after the settle's last
    step and its ``ForkResolved`` event (the mirror's removal hangs off it). It used to
    turn true at the settle's start: a front door that waited for it and then exited cut
    the manifest's save, the network release and the mirror's removal short (seen as a
    mirror left behind by ``test_the_diff_tool_gets_the_forks_mirror_never_the_live_tree``
    under load)."""
    import asyncio

    coord = await _fork(ws)
    events: list[ev.ForkEvent] = []
    coord.add_listener(events.append)
    ending_task = asyncio.ensure_future(_action(coord, ending))
    seen_over_early = False
    while not ending_task.done():
        if coord.is_resolved and not any(isinstance(e, ev.ForkResolved) for e in events):
            seen_over_early = True
        await asyncio.sleep(0)
    await ending_task
    await coord.flush()
    assert not seen_over_early, "the fork read as over before its end steps ran"
    assert coord.is_resolved
