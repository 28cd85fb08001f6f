"""A finished commit's scratch is removed in process, displaced directories included."""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core.workspace.fsutil import remove_shallow_tree


def test_remove_shallow_tree_removes_files_links_and_deeper_directories(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    (scratch / "displaced").mkdir(parents=True)
    (scratch / "new").mkdir()
    for i in range(50):
        (scratch / "displaced" / str(i)).write_text(f"old {i}")
    (scratch / "displaced" / "50").symlink_to("nowhere")
    deep = scratch / "displaced" / "51" / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    (scratch / ".made-state-dir").touch()
    remove_shallow_tree(scratch)
    assert not scratch.exists()
    assert list(tmp_path.iterdir()) == []


def test_remove_shallow_tree_of_a_missing_path_is_a_no_op(tmp_path: Path) -> None:
    remove_shallow_tree(tmp_path / "absent")
    assert list(tmp_path.iterdir()) == []


def test_remove_shallow_tree_of_a_file_removes_it(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    remove_shallow_tree(tmp_path / "f")
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("ops", [3, 100])
def test_a_commit_leaves_no_scratch(tmp_path: Path, ops: int) -> None:
    import time

    from branching_core.workspace import Workspace
    from branching_core.workspace.land import NewFile, land_files

    root = tmp_path / "project"
    root.mkdir()
    for i in range(ops):
        (root / f"f{i}").write_text("old")
    ws = Workspace(root, backend="copy", store=tmp_path / "store")
    land_files(ws, {f"f{i}": NewFile(data=b"new") for i in range(ops)}, since_ns=time.time_ns())
    assert all((root / f"f{i}").read_text() == "new" for i in range(ops))
    assert not (root / ".pydantic-deep").exists()
