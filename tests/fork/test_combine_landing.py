"""The combined merge lands through ``workspace.land_files``: one journaled commit of the
parent, no intermediate workspace branch (which on the copy backend was a full copy of
the tree). What lands must be what a branch commit would have landed: a file in a new
directory, a symlink as a symlink, the mode a branch gave a file, a deletion; and a
parent change after the fork is still a conflict with nothing applied."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from branching_core.fork import ForkCoordinator
from branching_core.fork.combine import CombineConflict
from branching_core.workspace import Workspace
from tests.review.forks import call, fork_with

from .conftest import project, runner

__all__ = ["project", "runner"]


@pytest.fixture(params=["auto", "copy"])
def ws(request: pytest.FixtureRequest, project: Path) -> Workspace:
    return Workspace(project, backend=request.param)


async def _fork(ws: Workspace) -> ForkCoordinator:
    coord = await fork_with(
        ws,
        {
            "a": [call("write_file", path="pkg/new/mod.py", content="x = 1\n")],
            "b": [call("write_file", path="tool.sh", content="#!/bin/sh\necho hi\n")],
        },
    )
    by = {rt.label: Path(rt.ws_branch.path) for rt in coord.branches.values()}
    os.chmod(by["b"] / "tool.sh", 0o750)
    os.symlink("tool.sh", by["b"] / "run")
    (by["a"] / "README.txt").unlink()
    return coord


async def test_combine_lands_new_dirs_modes_links_and_deletes_without_a_branch(
    ws: Workspace, project: Path
) -> None:
    coord = await _fork(ws)
    result = await coord.merge_or_select(
        "combine",
        selection={"pkg/new/mod.py": "a", "tool.sh": "b", "run": "b", "README.txt": "a"},
    )
    assert (project / "pkg" / "new" / "mod.py").read_text() == "x = 1\n"
    assert stat.S_IMODE(os.stat(project / "tool.sh").st_mode) == 0o750
    assert os.readlink(project / "run") == "tool.sh"
    assert not (project / "README.txt").exists()
    assert result.deleted_paths == ["README.txt"]
    assert {"pkg/new/mod.py", "tool.sh", "run"} <= set(result.applied_paths)
    assert ws.list_branches() == []  # the fork's branches are gone, nothing else left
    await coord.flush()


async def test_a_parent_change_after_the_fork_is_still_a_conflict(
    ws: Workspace, project: Path
) -> None:
    coord = await _fork(ws)
    time.sleep(0.02)  # past the coarse clock's tick
    (project / "README.txt").write_text("changed by someone else\n")
    with pytest.raises(CombineConflict):
        await coord.merge_or_select("combine", selection={"README.txt": "a", "tool.sh": "b"})
    assert (project / "README.txt").read_text() == "changed by someone else\n"
    assert not (project / "tool.sh").exists()
    assert not coord.is_resolved
    await coord.abort_fork()
