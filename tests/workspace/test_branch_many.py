"""``branch_many``: N sibling branches in one call (what a fork of N uses), all or none."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from branching_core import InvalidBranchNameError, Workspace
from branching_core.errors import MountError
from branching_core.workspace import mount_helper
from tests.workspace.treeutil import snapshot


def test_siblings_are_isolated_and_first_winner_commits(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    a, b, c = ws.branch_many(["a", "b", "c"], on_success=None, on_error=None)
    assert [x.branch_path for x in (a, b, c)] == ["/main/a", "/main/b", "/main/c"]
    for br in (a, b, c):
        (br.path / "a.txt").write_text(f"{br.name}\n")
    assert (ws_dir / "a.txt").read_text() == "a\n"
    assert (b.path / "a.txt").read_text() == "b\n"
    b.commit()
    assert (ws_dir / "a.txt").read_text() == "b\n"
    a.abort()
    c.abort()
    assert ws.open_branches() == []


def test_nested_batch_sees_its_parent_branch(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    with ws.branch("outer") as outer:
        (outer.path / "outer.txt").write_text("o\n")
        kids = outer.branch_many(["x", "y"], on_success=None, on_error=None)
        assert all((k.path / "outer.txt").read_text() == "o\n" for k in kids)
        (kids[0].path / "x.txt").write_text("x\n")
        kids[0].commit()
        kids[1].abort()
    assert (ws_dir / "x.txt").read_text() == "x\n"


def test_bad_names_create_nothing(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    before = snapshot(ws_dir)
    with pytest.raises(InvalidBranchNameError, match="unique"):
        ws.branch_many(["a", "a"])
    with pytest.raises(InvalidBranchNameError):
        ws.branch_many(["ok", "../escape"])
    existing = ws.branch("taken", on_success=None, on_error=None)
    with pytest.raises(InvalidBranchNameError, match="taken"):
        ws.branch_many(["fresh", "taken"])
    existing.abort()
    assert ws.open_branches() == [] and ws.list_branches() == []
    assert snapshot(ws_dir) == before


def test_a_failed_mount_rolls_back_every_sibling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper mounts the batch all or none; the store keeps no half-made branch."""
    ws_dir = tmp_path / "ws"
    ws_dir.mkdir()
    (ws_dir / "a.txt").write_text("a\n")
    ws = Workspace(ws_dir, backend="overlay")
    helper = mount_helper.shared_helper()
    real = helper.create_many

    def sabotage(branches: list[mount_helper.PreparedMount], **kw: Any) -> None:
        # A target that does not exist makes the third mount fail inside the helper
        # (after the helper made the third branch's directories).
        broken = [*branches[:2], replace(branches[2], target=Path("/nonexistent/v"))]
        real(broken, **kw)

    monkeypatch.setattr(helper, "create_many", sabotage)
    with pytest.raises(MountError, match="mount"):
        ws.branch_many(["a", "b", "c"])
    monkeypatch.undo()
    assert ws.open_branches() == [] and ws.list_branches() == []
    mounts = Path(f"/proc/{helper.pid}/mounts").read_text()
    assert str(ws.tree.store.root) not in mounts, "a sibling's overlay stayed mounted"
