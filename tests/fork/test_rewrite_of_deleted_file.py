"""A fork branch's ``write_file``/``edit_file`` on an existing file, which the parent then
deletes, is a conflict at the merge: never a silent resurrection.

The tools replace files by temp file + rename; in an overlay branch that left an upper
file with no ``overlay.origin`` xattr, read as "created by the branch" (``existed``
False), so the deletion was no conflict and the pick brought the file back. A plain
``Workspace.branch`` edit in place was a conflict. Real ``ForkCoordinator``, real Agents
on ``FunctionModel``, every backend the fork uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent

from branching_core import Workspace
from branching_core.agent import LocalCommandRunner
from branching_core.fork import BranchSpec
from branching_core.live import ForkCoordinator

from .helpers import Scripted, call

BACKENDS = ["overlay", "copy"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "tool",
    [
        call("write_file", path="src/app.py", content="VALUE = 'branch'\n"),
        call("edit_file", path="src/app.py", old="VALUE = 1", new="VALUE = 'branch'"),
    ],
    ids=["write_file", "edit_file"],
)
async def test_a_parent_deletion_of_a_file_the_branch_rewrote_is_a_conflict(
    project: Path, backend: str, tool: Any
) -> None:
    ws = Workspace(project, backend=backend)
    s = Scripted({"A": [tool, call("write_file", path="new.txt", content="n\n")]})
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=LocalCommandRunner())
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=30)
    (project / "src" / "app.py").unlink()  # the parent deletes it meanwhile
    result = await coord.merge_or_select("pick:a")
    assert result.conflicts == ["src/app.py"], result
    assert not (project / "src" / "app.py").exists()  # not brought back
    assert (project / "new.txt").read_text() == "n\n"
    ws.close()
