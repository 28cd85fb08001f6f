"""Deltas on this machine: collected from a real branch, landed by a journaled commit."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from branching_core.cluster.delta import Delta, apply, collect
from branching_core.cluster.snapshot import pack, scan, take
from branching_core.errors import ConflictError
from branching_core.workspace import Workspace
from tests.cluster.helpers import edit_everything, make_tree, tree_state


def _delta_of_edits(base: Path) -> Delta:
    ws = Workspace(base)
    branch = ws.branch("cand", on_success=None, on_error=None)
    try:
        edit_everything(branch.path)
        return collect(branch, base)
    finally:
        branch.abort()
        ws.close()


def test_a_delta_lands_exactly_what_a_local_commit_lands(tmp_path: Path) -> None:
    base = make_tree(tmp_path / "base")
    delta = _delta_of_edits(base)
    assert "olddir" in delta.deleted and "gone.txt" in delta.deleted
    assert not any(p.startswith(".pydantic-deep") for p in delta.paths())
    # the unchanged file is not shipped
    assert "bin/tool.sh" not in delta.files or delta.files["bin/tool.sh"][0] == 0o700

    expected_root = make_tree(tmp_path / "expected")
    edit_everything(expected_root)
    real = make_tree(tmp_path / "real")
    snap = take(real)
    ws = Workspace(real)
    apply(ws, delta, snap, name="land")
    assert tree_state(real) == tree_state(expected_root)
    assert (real / ".pydantic-deep" / "state.json").read_text() == "{}"
    assert ws.open_branches() == []
    ws.close()


def test_a_path_changed_since_the_snapshot_is_a_conflict_and_nothing_lands(
    tmp_path: Path,
) -> None:
    base = make_tree(tmp_path / "base")
    delta = _delta_of_edits(base)
    real = make_tree(tmp_path / "real")
    snap = take(real)
    time.sleep(0.02)  # past the coarse clock's tick (file change times come from it)
    (real / "a.txt").write_text("changed by someone else\n")
    (real / "olddir" / "deep" / "f").write_text("also changed\n")
    before = tree_state(real)
    ws = Workspace(real)
    with pytest.raises(ConflictError) as info:
        apply(ws, delta, snap, name="land")
    assert set(info.value.paths) == {"a.txt", "olddir/deep/f"}
    assert tree_state(real) == before
    assert ws.open_branches() == []
    ws.close()


def test_an_unrelated_parent_change_does_not_conflict(tmp_path: Path) -> None:
    base = make_tree(tmp_path / "base")
    delta = _delta_of_edits(base)
    real = make_tree(tmp_path / "real")
    snap = take(real)
    (real / "unrelated.txt").write_text("someone else's work\n")
    ws = Workspace(real)
    apply(ws, delta, snap, name="land")
    assert (real / "unrelated.txt").read_text() == "someone else's work\n"
    assert (real / "a.txt").read_text() == "alpha, edited\n"
    ws.close()


def test_snapshot_key_is_content_addressed_and_packs_dedupe(tmp_path: Path) -> None:
    one = make_tree(tmp_path / "one")
    two = tmp_path / "two"
    shutil.copytree(one, two, symlinks=True)
    (one / "dup.txt").write_text("alpha\n")  # same content as a.txt
    (two / "dup.txt").write_text("alpha\n")
    s1, s2 = pack(take(one)), pack(take(two))
    assert s1.key == s2.key
    assert ".pydantic-deep" not in s1.manifest
    sizes = {e[3]: e[2] for e in scan(one).values() if e[0] == "f"}
    assert s1.content_bytes == sum(sizes.values())  # each distinct content once
    (two / "a.txt").write_text("different\n")
    assert take(two).key != s1.key
