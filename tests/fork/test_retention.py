"""12.11: resolved forks are pruned by a documented policy, and ``forkdeck status`` shows
what ``.pydantic-deep/forks`` holds.

Before: every fork left ``forks/<id>/`` (manifest, histories, copies of every file the
merge replaced and wrote) forever.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent

from branching_core.cli import main as cli_main
from branching_core.fork import BranchSpec, CheckpointStore, ForkCoordinator, ForkStore
from branching_core.fork.retention import REWIND_WINDOW

from .helpers import Scripted, call


async def _resolved_forks(ws, runner, n: int, **options: Any) -> list[str]:
    ids = []
    for i in range(n):
        s = Scripted({f"S{i}": [call("write_file", path="f.txt", content=f"v{i}" * 1000)]})
        coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner, **options)
        handle = await coord.fork([BranchSpec("a", f"S{i}")], parent_history=[])
        await coord.wait(timeout=20)
        await coord.merge_or_select("pick:a")
        await coord.flush()
        ids.append(handle.fork_id)
    return ids


async def test_old_resolved_forks_lose_file_copies_then_go(ws, project: Path, runner) -> None:
    store = ForkStore(project)
    keep = REWIND_WINDOW + 1
    ids = await _resolved_forks(ws, runner, keep + 2, keep_resolved=keep)
    # An open fork is never pruned, however old.
    s = Scripted({"O": ["O: over"]})
    open_coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
    await open_coord.fork([BranchSpec("o", "O")], parent_history=[])
    await open_coord.wait(timeout=20)
    await _resolved_forks(ws, runner, 1, keep_resolved=keep)  # one more resolution: prune

    present = {p.name for p in store.forks_dir.iterdir()}
    newest = ids[-(keep - 1) :]  # plus the one resolved after the open fork
    assert set(ids[: len(ids) - (keep - 1)]).isdisjoint(present), "too old: removed"
    assert set(newest) <= present and open_coord.fork_id in present
    checkpoints = CheckpointStore(store)
    oldest_kept = newest[0]  # rank REWIND_WINDOW: manifest and histories, no file copies
    assert store.read_manifest(oldest_kept) is not None
    assert store.read_history(oldest_kept, "parent") is not None
    assert not (store.fork_dir(oldest_kept) / "checkpoints" / "fork" / "files").exists()
    with pytest.raises(RuntimeError, match="rewind window"):
        checkpoints.rewind(f"fork:{oldest_kept}")
    for fork_id in newest[1:]:  # still rewindable
        assert (store.fork_dir(fork_id) / "checkpoints" / "fork" / "files").exists()
    await open_coord.aclose()


async def test_keep_resolved_is_read_from_config_toml(ws, project: Path, runner) -> None:
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text("[fork]\nkeep_resolved = 1\n")
    ids = await _resolved_forks(ws, runner, 3)
    assert [p.name for p in ForkStore(project).forks_dir.iterdir()] == [ids[-1]]


async def test_status_shows_what_the_forks_directory_holds(
    ws, project: Path, runner, capsys
) -> None:
    (fork_id,) = await _resolved_forks(ws, runner, 1)
    capsys.readouterr()
    assert cli_main(["status", "-w", str(project), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (entry,) = data["forks"]
    assert entry["id"] == fork_id and entry["state"].startswith("resolved: pick:")
    assert entry["branches"] == 1 and entry["rewindable"] and entry["size_bytes"] > 2000
    assert data["forks_store"]["size_bytes"] == entry["size_bytes"]
    assert data["forks_store"]["keep_resolved"] == 20
    assert cli_main(["status", "-w", str(project)]) == 0
    text = capsys.readouterr().out
    assert f"{fork_id}  resolved: pick:" in text and "rewindable" in text
