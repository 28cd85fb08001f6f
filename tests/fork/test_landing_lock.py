"""Fork merges and sub-agent landings into one parent take one lock (per parent path).

They used to take two different locks, so a fork's winner and a sub-agent's branch could
both pass the "is it stale?" check and commit at once; the workspace's first-winner rule
then aborted the second one, and its files were lost.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic_ai import Agent

from branching_core.fork import BranchSpec, ForkCoordinator
from branching_core.live.subagents.merge import land

from .helpers import Scripted, call


async def test_concurrent_fork_merge_and_subagent_landing_both_land(
    ws, project: Path, runner
) -> None:
    rounds = 8
    for i in range(rounds):
        s = Scripted({f"A{i}": [call("write_file", path=f"fork-{i}.txt", content="f")]})
        coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
        await coord.fork([BranchSpec("a", f"A{i}")], parent_history=[])
        await coord.wait(timeout=20)
        sub = ws.branch(f"sub-{i}", on_success=None)
        for k in range(30):  # enough files that the two commits overlap in time
            (Path(sub.path) / f"sub-{i}-{k}.txt").write_text("s")
        result, landing = await asyncio.gather(coord.merge_or_select("pick:a"), land(sub))
        assert not result.errors and f"fork-{i}.txt" in result.applied_paths, result.errors
        assert landing.committed and not landing.errors, landing
        assert (project / f"fork-{i}.txt").exists()
        assert all((project / f"sub-{i}-{k}.txt").exists() for k in range(30))
