"""Branch semantics, identical on every backend: isolation, commit, abort, nesting,
first-winner-commit and conflicts."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from branching_core import (
    BranchClosedError,
    ConflictError,
    OpenChildrenError,
    Workspace,
)
from tests.workspace.treeutil import snapshot


def test_commit_publishes_creates_modifications_and_deletes(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    assert ws.fstype == backend
    with ws.branch("attempt") as b:
        assert b.branch_path == "/main/attempt"
        (b.path / "new.txt").write_text("new\n")
        (b.path / "a.txt").write_text("changed\n")
        (b.path / "sub" / "b.txt").unlink()
        assert (ws_dir / "a.txt").read_text() == "a\n"  # the parent is untouched until commit
        changes = b.changes()
        assert changes.created == ["new.txt"]
        assert changes.modified == ["a.txt"]
        assert changes.deleted == ["sub/b.txt"]
    assert b.state == "committed"
    assert (ws_dir / "new.txt").read_text() == "new\n"
    assert (ws_dir / "a.txt").read_text() == "changed\n"
    assert not (ws_dir / "sub" / "b.txt").exists()
    assert ws.open_branches() == []


def test_abort_leaves_parent_exactly_as_it_was(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    before = snapshot(ws_dir)
    b = ws.branch("throwaway")
    (b.path / "a.txt").write_text("garbage")
    (b.path / "sub" / "b.txt").unlink()
    (b.path / "junk").mkdir()
    b.abort()
    assert b.state == "aborted"
    assert snapshot(ws_dir) == before
    assert ws.tree.store.branch_ids() == []


def test_exception_in_block_aborts(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    before = snapshot(ws_dir)
    with pytest.raises(RuntimeError), ws.branch("failing") as b:
        (b.path / "a.txt").write_text("half-done")
        raise RuntimeError("agent crashed")
    assert b.state == "aborted"
    assert snapshot(ws_dir) == before


def test_manual_control_without_decision_never_leaves_a_branch_open(
    ws_dir: Path, backend: str
) -> None:
    ws = Workspace(ws_dir, backend=backend)
    with ws.branch("manual", on_success=None, on_error=None) as b:
        (b.path / "a.txt").write_text("undecided")
    assert b.state == "aborted"
    assert (ws_dir / "a.txt").read_text() == "a\n"
    assert ws.open_branches() == []


def test_siblings_never_see_each_other(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    left, right = ws.branch("left"), ws.branch("right")
    (left.path / "only_left.txt").write_text("L")
    (right.path / "a.txt").write_text("R")
    assert not (right.path / "only_left.txt").exists()
    assert (left.path / "a.txt").read_text() == "a\n"
    left.abort()
    right.abort()


def test_nesting_commits_into_the_immediate_parent_only(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    a = ws.branch("strategy")
    (a.path / "level1.txt").write_text("1")
    b = a.branch("variant")
    assert b.branch_path == "/main/strategy/variant"
    (b.path / "level2.txt").write_text("2")
    c = b.branch("tweak")
    (c.path / "level3.txt").write_text("3")
    assert (c.path / "level1.txt").read_text() == "1"  # children see their ancestors' changes
    c.commit()
    assert (b.path / "level3.txt").read_text() == "3"
    assert not (a.path / "level3.txt").exists()
    b.commit()
    assert (a.path / "level3.txt").exists() and not (ws_dir / "level2.txt").exists()
    a.commit()
    assert sorted(p.name for p in ws_dir.glob("level*.txt")) == [
        "level1.txt",
        "level2.txt",
        "level3.txt",
    ]
    assert ws.open_branches() == []


def test_commit_with_open_children_is_refused(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    before = snapshot(ws_dir)
    parent = ws.branch("parent")
    (parent.path / "p.txt").write_text("p")
    child = parent.branch("child")
    with pytest.raises(OpenChildrenError, match="child"):
        parent.commit()
    assert parent.is_open and snapshot(ws_dir) == before
    child.abort()
    parent.commit()
    assert (ws_dir / "p.txt").read_text() == "p"


def test_first_winner_commit_aborts_the_losers(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    first, second, third = ws.branch("first"), ws.branch("second"), ws.branch("third")
    for branch in (first, second, third):
        (branch.path / "answer.txt").write_text(branch.name)
    (third.path / "unrelated.txt").write_text("no overlap does not matter")
    first.commit()
    for loser in (second, third):
        with pytest.raises(ConflictError) as info:
            loser.commit()
        assert info.value.stale
        assert loser.state == "aborted"
    assert (ws_dir / "answer.txt").read_text() == "first"
    assert not (ws_dir / "unrelated.txt").exists()
    assert ws.open_branches() == []


def test_parent_change_to_the_same_path_is_a_conflict_never_overwritten(
    ws_dir: Path, backend: str
) -> None:
    ws = Workspace(ws_dir, backend=backend)
    b = ws.branch("edit")
    (b.path / "a.txt").write_text("branch version\n")
    (b.path / "mine.txt").write_text("mine\n")
    (ws_dir / "a.txt").write_text("someone else's version\n")
    with pytest.raises(ConflictError) as info:
        b.commit()
    assert info.value.paths == ["a.txt"] and not info.value.stale
    assert (ws_dir / "a.txt").read_text() == "someone else's version\n"
    assert not (ws_dir / "mine.txt").exists()  # nothing of the commit was applied
    assert b.is_open  # left open so the conflict can be inspected
    assert (b.path / "a.txt").read_text() == "branch version\n"
    b.abort()


def test_parent_change_elsewhere_is_kept_by_the_commit(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    b = ws.branch("edit")
    (b.path / "a.txt").write_text("branch version\n")
    (ws_dir / "sub" / "b.txt").write_text("edited by the user\n")
    b.commit()
    assert (ws_dir / "a.txt").read_text() == "branch version\n"
    assert (ws_dir / "sub" / "b.txt").read_text() == "edited by the user\n"


def test_file_deleted_in_parent_but_modified_in_branch_is_a_conflict(
    ws_dir: Path, backend: str
) -> None:
    ws = Workspace(ws_dir, backend=backend)
    b = ws.branch("edit")
    (b.path / "sub" / "b.txt").write_text("branch kept working on it\n")
    (ws_dir / "sub" / "b.txt").unlink()
    with pytest.raises(ConflictError) as info:
        b.commit()
    assert info.value.paths == ["sub/b.txt"]
    assert not (ws_dir / "sub" / "b.txt").exists()
    b.abort()


def test_closed_branches_refuse_a_second_commit_or_abort(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    b = ws.branch("once")
    b.commit()
    before = snapshot(ws_dir)
    with pytest.raises(BranchClosedError, match="already committed"):
        b.commit()
    with pytest.raises(BranchClosedError):
        b.abort()
    c = ws.branch("twice")
    c.abort()
    with pytest.raises(BranchClosedError, match="already aborted"):
        c.abort()
    with pytest.raises(BranchClosedError):
        c.branch("child")
    assert snapshot(ws_dir) == before


def test_view_is_usable_from_threads_and_child_processes(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    with ws.branch("shared") as b:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: (b.path / f"t{i}.txt").write_text(str(i)), range(8)))
        out = subprocess.run(
            ["cat", str(b.path / "t3.txt")], capture_output=True, text=True, check=True
        )
        assert out.stdout == "3"
        subprocess.run(["sh", "-c", f"echo from-child > '{b.path}/child.txt'"], check=True)
    assert (ws_dir / "child.txt").read_text() == "from-child\n"
    assert len(list(ws_dir.glob("t*.txt"))) == 8


def test_project_state_and_branch_store_are_hidden_from_views(ws_dir: Path, backend: str) -> None:
    (ws_dir / ".pydantic-deep").mkdir()
    (ws_dir / ".pydantic-deep" / "config.toml").write_text("[fork]\n")
    ws = Workspace(ws_dir, backend=backend)
    with ws.branch("peek", on_success=None) as b:
        names = os.listdir(b.path)
        assert ".pydantic-deep" not in names
        assert sorted(names) == ["a.txt", "sub"]
        b.abort()
    assert (ws_dir / ".pydantic-deep" / "config.toml").read_text() == "[fork]\n"
