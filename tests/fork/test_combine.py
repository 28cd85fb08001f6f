"""merge_or_select("combine", selection=...): real forks (pydantic-ai Agents on FunctionModels
writing through the workspace tools) in real copy-on-write workspaces, on the automatic
backend (overlay here) and on plain copies."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from branching_core.fork import BranchSpec, ForkCoordinator, MergeAction
from branching_core.fork.combine import CombineConflict, CombineError, branch_hunks, hunks_of
from branching_core.workspace import Workspace
from branching_core.workspace.apply import change_ops
from branching_core.workspace.changes import find_conflicts
from tests.fork.helpers import Scripted, request_text
from tests.review.forks import call, fork_with
from tests.support.typed import view_of

from .conftest import project, runner

__all__ = ["project", "runner"]

PARENT = "line1\nline2\nline3\nline4\nline5\nline6\n"
A_CALC = "line1\nA2\nline3\nline4\nA5\nline6\n"  # hunks: a#0 line 2, a#1 line 5
B_CALC = "line1\nB2\nline3\nline4\nline5\nline6\nB7\n"  # hunks: b#0 line 2, b#1 after line 6


@pytest.fixture(params=["auto", "copy"])
def ws(request: pytest.FixtureRequest, project: Path) -> Workspace:
    (project / "calc.py").write_text(PARENT)
    return Workspace(project, backend=request.param)


async def two_branches(ws: Workspace) -> ForkCoordinator:
    coord = await fork_with(
        ws,
        {
            "a": [
                call("write_file", path="calc.py", content=A_CALC),
                call("write_file", path="parser.py", content="def parse(): ...\n"),
            ],
            "b": [
                call("write_file", path="calc.py", content=B_CALC),
                call("write_file", path="test_x.py", content="def test_x(): ...\n"),
            ],
        },
    )
    by = {rt.label: Path(rt.ws_branch.path) for rt in coord.branches.values()}
    # b also deletes a file and adds a binary one (written into its view directly)
    (by["b"] / "README.txt").unlink()
    (by["b"] / "logo.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    return coord


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".pydantic-deep" not in p.parts
    }


def test_hunks_are_numbered_per_branch() -> None:
    a = hunks_of("a", PARENT.encode(), A_CALC.encode())
    b = hunks_of("b", PARENT.encode(), B_CALC.encode())
    assert [(h.start, h.end, h.lines) for h in a] == [(1, 2, ("A2\n",)), (4, 5, ("A5\n",))]
    assert [(h.start, h.end, h.lines) for h in b] == [(1, 2, ("B2\n",)), (6, 6, ("B7\n",))]
    assert a[0].overlaps(b[0]) and not a[1].overlaps(b[1])


async def test_per_file_and_per_hunk(ws: Workspace, project: Path) -> None:
    coord = await two_branches(ws)
    result = await coord.merge_or_select(
        "combine",
        selection={
            "parser.py": "a",
            "test_x.py": "b",
            "calc.py": ["a:1", ("b", 0), {"branch": "b", "hunk": 1}],
        },
    )
    assert (project / "calc.py").read_text() == "line1\nB2\nline3\nline4\nA5\nline6\nB7\n"
    assert (project / "parser.py").read_text() == "def parse(): ...\n"
    assert (project / "test_x.py").read_text() == "def test_x(): ...\n"
    # what was not selected stayed as the parent has it
    assert (project / "README.txt").read_text() == "hello\n"
    assert not (project / "logo.bin").exists()
    assert result.action == "combine" and coord.is_resolved
    assert sorted(result.applied_paths) == ["calc.py", "parser.py", "test_x.py"]
    # base = the branch most things were taken from (b: test_x, b#0, b#1)
    assert result.winner_label == "b"
    note = result.history_after_merge[-1].parts[0].content
    assert "- parser.py: from a" in note and "- calc.py: hunks b#0, a#1, b#1" in note
    assert all(rt.ws_branch is None for rt in coord.branches.values())


async def test_overlapping_hunks_apply_nothing(ws: Workspace, project: Path) -> None:
    coord = await two_branches(ws)
    before = snapshot(project)
    with pytest.raises(CombineConflict) as info:
        await coord.merge_or_select(
            "combine", selection={"parser.py": "a", "calc.py": ["a:0", "b:0"]}
        )
    assert info.value.conflicts == ["calc.py: hunk a#0 (lines 2-2) overlaps hunk b#0 (lines 2-2)"]
    assert snapshot(project) == before and not coord.is_resolved
    # the fork is still open: a corrected selection merges
    await coord.merge_or_select("combine", selection={"calc.py": ["a:0", "a:1"]}, base="a")
    assert (project / "calc.py").read_text() == A_CALC


async def test_binary_per_file_yes_per_hunk_no(ws: Workspace, project: Path) -> None:
    coord = await two_branches(ws)
    before = snapshot(project)
    with pytest.raises(CombineError, match=r"logo\.bin: binary file"):
        await coord.merge_or_select("combine", selection={"logo.bin": ["b:0"]})
    assert snapshot(project) == before
    result = await coord.merge_or_select(
        "combine", selection={"logo.bin": "b", "README.txt": "b", "calc.py": "parent"}
    )
    assert (project / "logo.bin").read_bytes() == b"\x89PNG\x00\x01\x02"
    assert not (project / "README.txt").exists()  # b deleted it
    assert (project / "calc.py").read_text() == PARENT
    assert result.deleted_paths == ["README.txt"]


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        ({"calc.py": "zed"}, "no branch 'zed'"),
        ({"calc.py": ["a:7"]}, "a has 2 hunk"),
        ({"calc.py": ["a-0"]}, "label:index"),
        ({"../escape.py": "a"}, "not a path inside"),
        ({"nowhere.py": "a"}, "neither a nor the parent"),
        ({}, "empty"),
    ],
)
async def test_bad_selection_changes_nothing(
    ws: Workspace, project: Path, selection: dict, message: str
) -> None:
    coord = await two_branches(ws)
    before = snapshot(project)
    with pytest.raises(CombineError, match=message):
        await coord.merge_or_select("combine", selection=selection)
    assert snapshot(project) == before and not coord.is_resolved
    await coord.abort_fork()


async def test_parent_changed_since_the_fork_is_a_conflict(ws: Workspace, project: Path) -> None:
    coord = await two_branches(ws)
    (project / "calc.py").write_text("edited by hand\n")
    with pytest.raises(CombineConflict, match=r"calc\.py: changed in the parent"):
        await coord.merge_or_select("combine", selection={"calc.py": ["a:0"], "parser.py": "a"})
    assert (project / "calc.py").read_text() == "edited by hand\n"
    assert not (project / "parser.py").exists()
    await coord.abort_fork()


async def test_a_combine_finds_a_parent_change_by_the_one_conflict_rule(
    ws: Workspace, project: Path
) -> None:
    """The typed action, and the rule every landing has (``changes.find_conflicts``): a
    rewrite with the very bytes the parent held is a change since the fork all the same."""
    coord = await two_branches(ws)
    time.sleep(0.02)  # past the coarse clock's tick
    (project / "calc.py").write_bytes((project / "calc.py").read_bytes())
    since = min(rt.ws_branch.created_ns for rt in coord.branches.values() if rt.ws_branch)
    ops = change_ops(written=["calc.py", "parser.py"])
    assert find_conflicts(ops, project, since) == ["calc.py"]
    action = MergeAction.combine({"calc.py": ["a:0"], "parser.py": "a"})
    with pytest.raises(CombineConflict, match=r"calc\.py: changed in the parent"):
        await coord.merge_or_select(action)
    assert not (project / "parser.py").exists() and not coord.is_resolved
    await coord.abort_fork()


async def test_branch_hunks_for_a_ui(ws: Workspace) -> None:
    coord = await two_branches(ws)
    hunks = branch_hunks(coord, "calc.py")
    assert {label: [h.index for h in hs] for label, hs in hunks.items()} == {
        "a": [0, 1],
        "b": [0, 1],
    }
    assert branch_hunks(coord, "parser.py")["b"] == []  # b did not create it
    with pytest.raises(CombineError, match="binary"):
        branch_hunks(coord, "logo.bin")
    await coord.abort_fork()


async def test_preview_writes_nothing(ws: Workspace, project: Path) -> None:
    coord = await two_branches(ws)
    before = snapshot(project)
    plan = coord.combine_preview({"calc.py": ["b:1"], "parser.py": "a"}, base="a")
    (calc,) = [p for p in plan.paths if p.path == "calc.py"]
    assert calc.data == (PARENT + "B7\n").encode() and calc.taken == ["b#1"]
    assert plan.base_label == "a"
    assert snapshot(project) == before
    await coord.abort_fork()


async def test_the_model_sees_the_note_at_its_next_request(ws: Workspace, project: Path) -> None:
    coord = await two_branches(ws)
    result = await coord.merge_or_select("combine", selection={"parser.py": "a"})
    seen: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(request_text(messages))
        return ModelResponse(parts=[TextPart("ok")])

    await Agent(FunctionModel(respond)).run("go on", message_history=result.history_after_merge)
    assert "- parser.py: from a" in seen[0] and "go on" in seen[0]
    assert os.path.exists(project / "parser.py")


async def test_nested_fork_combines_into_its_outer_branch(ws: Workspace, project: Path) -> None:
    """In a nested fork the parent is the outer branch: the result lands there, not in the
    project, through the outer branch's own workspace node."""
    coord = await fork_with(ws, {"outer": [call("write_file", path="o.txt", content="o\n")]})
    inner = coord.nested("outer")
    scripted = Scripted(
        {
            "do x": [call("write_file", path="calc.py", content=A_CALC)],
            "do y": [call("write_file", path="calc.py", content=B_CALC)],
        }
    )
    inner.agent = Agent(scripted.model)
    await inner.fork([BranchSpec("x", "do x"), BranchSpec("y", "do y")], parent_history=[])
    await inner.wait(timeout=30)
    await inner.merge_or_select("combine", selection={"calc.py": ["x:1", "y:1"]})
    outer_dir = view_of(coord.get_branch("outer"))
    assert (outer_dir / "calc.py").read_text() == "line1\nline2\nline3\nline4\nA5\nline6\nB7\n"
    assert (project / "calc.py").read_text() == PARENT
    await coord.merge_or_select("pick:outer")
    assert (project / "calc.py").read_text() == "line1\nline2\nline3\nline4\nA5\nline6\nB7\n"
    assert (project / "o.txt").read_text() == "o\n"
