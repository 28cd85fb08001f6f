"""12.9 for fork state: a repository that ships ``.pydantic-deep`` as a symlink leading out
of the workspace gets a one-line refusal from ``fork()``; nothing is written there and no
workspace branch is left behind (the settings side is in tests/config)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic_ai import Agent

from branching_core.errors import WorkspaceError
from branching_core.fork import BranchSpec, ForkCoordinator

from .helpers import Scripted, call


@pytest.mark.parametrize("dangling", [False, True])
async def test_fork_refuses_a_state_dir_leading_outside(
    ws, project: Path, runner, tmp_path: Path, dangling: bool
) -> None:
    outside = tmp_path / "outside-state"
    if not dangling:
        outside.mkdir()
    os.symlink(outside, project / ".pydantic-deep")
    s = Scripted({"S": [call("write_file", path="f.txt", content="x")]})
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
    with pytest.raises(WorkspaceError, match="leaves the workspace"):
        await coord.fork([BranchSpec("a", "S"), BranchSpec("b", "S")], parent_history=[])
    assert not outside.exists() or list(outside.iterdir()) == []
    assert [b for b in ws.list_branches() if b.durable] == []
    assert not (project / "f.txt").exists()
