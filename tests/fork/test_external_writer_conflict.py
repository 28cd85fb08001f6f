"""A fork branch whose shell command rewrites a parent file (``sed -i``: temp file +
rename, as every editor and agent CLI saves) conflicts with the parent's own change to
that file at the merge: never a silent resurrection or overwrite.

In an overlay branch the renamed file carried no ``overlay.origin`` xattr, so it was taken
for a file the branch created: the parent deleting it meanwhile was no conflict and the
pick brought it back. Only the agent's own ``write_file``/``edit_file`` were covered. Real
``ForkCoordinator``, a real ``Agent`` on ``FunctionModel`` whose ``run_command`` tool runs
``sed -i`` in the branch's real sandbox, every backend the fork uses.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic_ai import Agent

from branching_core import ConflictError, Workspace
from branching_core.agent import SandboxCommandRunner
from branching_core.fork import BranchSpec, MergeAction
from branching_core.fork.combine import CombineConflict
from branching_core.live import ForkCoordinator

from .helpers import Scripted, call

OVERLAY_HAND_LIMIT = (
    "overlay: a file sed -i renamed over the parent's looks new, and the parent's removal "
    "by hand in a directory changed by hand leaves no record (the documented trade-off in "
    "docs/workspaces.md; the modify case runs on overlay)"
)
CASES = [("overlay", "modify"), ("copy", "delete"), ("copy", "modify")]  # not: OVERLAY_HAND_LIMIT
SED = "sed -i 's/VALUE = 1/VALUE = 2/' src/app.py"


def _tree(root: Path) -> dict[str, bytes]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".pydantic-deep"]
        for name in filenames:
            path = Path(dirpath) / name
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


async def _forked(project: Path, backend: str) -> tuple[ForkCoordinator, Workspace]:
    ws = Workspace(project, backend=backend)
    s = Scripted({"A": [call("run_command", command=SED),
                        call("write_file", path="new.txt", content="n\n")]})
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=SandboxCommandRunner())
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=60)
    branch = coord.get_branch("a").ws_branch
    assert branch is not None
    assert (Path(branch.path) / "src" / "app.py").read_text() == "VALUE = 2\n"
    return coord, ws


def _parent_changes(project: Path, action: str) -> None:
    if action == "delete":
        (project / "src" / "app.py").unlink()
    else:
        (project / "src" / "app.py").write_text("VALUE = 'parent'\n")


@pytest.mark.parametrize(("backend", "action"), CASES)
async def test_the_default_pick_keeps_the_parents_version_and_reports_it(
    project: Path, backend: str, action: str
) -> None:
    coord, ws = await _forked(project, backend)
    _parent_changes(project, action)
    parents = (project / "src" / "app.py").read_bytes() if action == "modify" else None
    result = await coord.merge_or_select(MergeAction.pick("a"))
    assert result.conflicts == ["src/app.py"], result
    assert result.applied_paths == ["new.txt"]
    assert (project / "new.txt").read_text() == "n\n"
    if parents is None:
        assert not (project / "src" / "app.py").exists(), "the deleted file came back"
    else:
        assert (project / "src" / "app.py").read_bytes() == parents
    ws.close()


@pytest.mark.parametrize(("backend", "action"), CASES)
async def test_a_refusing_pick_changes_nothing(
    project: Path, backend: str, action: str
) -> None:
    coord, ws = await _forked(project, backend)
    _parent_changes(project, action)
    before = _tree(project)
    with pytest.raises(ConflictError) as info:
        await coord.merge_or_select(MergeAction.pick("a", on_conflict="refuse"))
    assert info.value.paths == ["src/app.py"] and not info.value.stale
    assert _tree(project) == before, "a refused pick changed the parent"
    assert not coord.is_resolved
    assert coord.get_branch("a").ws_branch is not None
    await coord.merge_or_select(MergeAction.abort())
    ws.close()


@pytest.mark.parametrize("backend", ["copy"])  # overlay: OVERLAY_HAND_LIMIT
async def test_a_combine_taking_the_rewritten_file_conflicts(project: Path, backend: str) -> None:
    """A combine takes ``src/app.py`` from the branch whose ``sed -i`` rewrote it after the
    parent deleted it: ``CombineConflict``, nothing written (it used to be landed as a
    file the branch created, on every backend: the combine said no path existed)."""
    ws = Workspace(project, backend=backend)
    s = Scripted({"A": [call("run_command", command=SED)],
                  "B": [call("write_file", path="b.txt", content="b\n")]})
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=SandboxCommandRunner())
    await coord.fork([BranchSpec("a", "A"), BranchSpec("b", "B")], parent_history=[])
    await coord.wait(timeout=60)
    (project / "src" / "app.py").unlink()
    before = _tree(project)
    with pytest.raises(CombineConflict, match=r"src/app\.py: changed in the parent"):
        await coord.merge_or_select(MergeAction.combine({"src/app.py": "a", "b.txt": "b"}))
    assert _tree(project) == before and not coord.is_resolved
    await coord.abort_fork()
    ws.close()
