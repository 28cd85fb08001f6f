"""A pick can ask the engine to refuse a conflicting winner (issue 23: one conflict rule).

``MergeAction.pick(label, on_conflict="refuse")``: when the parent changed a path the
winner changed too since the fork (``changes.find_conflicts``), the engine raises
``ConflictError`` naming the paths and nothing happens: every file of the parent, every
branch and the fork stay as they were, so the user can pick another branch. The default
(``land_rest``, what the model's merge tool and the CLI use) still lands the rest.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic_ai import Agent

from branching_core import ConflictError
from branching_core.fork import BranchSpec, MergeAction, MergeActionError
from branching_core.live import ForkCoordinator

from .helpers import Scripted, call


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the workspace (forkdeck's own state excluded): content and mode."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".pydantic-deep"]
        for name in filenames:
            path = Path(dirpath) / name
            found[str(path.relative_to(root))] = (path.read_bytes(), path.stat().st_mode)
    return found


async def _two_branches(ws, runner) -> ForkCoordinator:
    s = Scripted(
        {
            "A": [
                call("write_file", path="src/app.py", content="VALUE = 3\n"),
                call("write_file", path="new.txt", content="n"),
            ],
            "B": [call("write_file", path="b.txt", content="b\n")],
        }
    )
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
    await coord.fork([BranchSpec("a", "A"), BranchSpec("b", "B")], parent_history=[])
    await coord.wait(timeout=20)
    return coord


async def test_a_refusing_pick_of_a_conflicting_branch_changes_nothing(
    ws, project: Path, runner
) -> None:
    coord = await _two_branches(ws, runner)
    (project / "src/app.py").write_text("VALUE = 99\n")  # the parent changed it meanwhile
    before = _tree(project)
    with pytest.raises(ConflictError) as info:
        await coord.merge_or_select(MergeAction.pick("a", on_conflict="refuse"))
    assert info.value.paths == ["src/app.py"] and not info.value.stale
    assert "branch a was not merged: src/app.py changed in the parent" in str(info.value)
    assert _tree(project) == before  # not even new.txt landed
    assert not coord.is_resolved  # the fork is open: both branches can still be picked
    assert {b.label: b.resolution for b in coord.inspect_branches()} == {"a": None, "b": None}
    assert coord.get_branch("a").ws_branch is not None

    # the user picks the other branch instead: it lands as usual
    result = await coord.merge_or_select(MergeAction.pick("b", on_conflict="refuse"))
    assert result.winner_label == "b" and result.conflicts == []
    assert (project / "b.txt").read_text() == "b\n"
    assert (project / "src/app.py").read_text() == "VALUE = 99\n"
    assert not (project / "new.txt").exists()


async def test_the_default_pick_still_lands_the_rest(ws, project: Path, runner) -> None:
    coord = await _two_branches(ws, runner)
    (project / "src/app.py").write_text("VALUE = 99\n")
    result = await coord.merge_or_select(MergeAction.pick("a"))
    assert result.conflicts == ["src/app.py"] and result.applied_paths == ["new.txt"]
    assert (project / "src/app.py").read_text() == "VALUE = 99\n"


async def test_a_refusing_pick_without_conflicts_merges(ws, project: Path, runner) -> None:
    coord = await _two_branches(ws, runner)
    result = await coord.merge_or_select(MergeAction.pick("a", on_conflict="refuse"))
    assert result.winner_label == "a" and result.conflicts == []
    assert sorted(result.applied_paths) == ["new.txt", "src/app.py"]
    assert (project / "src/app.py").read_text() == "VALUE = 3\n"


def test_an_unknown_conflict_rule_is_refused_in_one_line() -> None:
    with pytest.raises(MergeActionError, match="unknown on_conflict 'merge'"):
        MergeAction.pick("a", on_conflict="merge")  # type: ignore[arg-type]
    assert MergeAction.pick("a") == MergeAction.pick(" a ", on_conflict="land_rest")
    assert str(MergeAction.pick("a", on_conflict="refuse")) == "pick:a"  # what events record
