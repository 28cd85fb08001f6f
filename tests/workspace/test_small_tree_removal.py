"""A small discarded tree is removed in this process, a big one by an ``rm`` child.

Every aborted overlay branch leaves a store directory of a handful of entries (a Ray
task aborts one per task). An ``rm`` child for it cost two ``exec``s (``setpriv``,
``rm``), about 2 ms of CPU on a busy machine, and its fork copied every fd of the caller
until the exec: a pipe the caller had just closed could read as open for that moment
(the class of race the sandbox's executor pool had).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from branching_core.workspace import treescan


def _spawned_during(action: Callable[[], None]) -> list[str]:
    spawned: list[str] = []
    active = [True]

    def audit(event: str, args: tuple[object, ...]) -> None:
        if active[0] and event == "subprocess.Popen":
            spawned.append(str(args[1]))

    sys.addaudithook(audit)  # hooks cannot be removed: this one stops listening below
    try:
        action()
    finally:
        active[0] = False
    return spawned


def test_a_small_tree_goes_without_a_child_process(tmp_path: Path) -> None:
    small = tmp_path / "small"
    (small / "upper" / "d").mkdir(parents=True)
    (small / "work" / "work").mkdir(parents=True)
    (small / "upper" / "d" / "f.txt").write_text("x")
    os.symlink("/nonexistent", small / "upper" / "link")
    os.mkfifo(small / "upper" / "fifo")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    os.symlink(outside, small / "upper" / "to-outside")  # a link is removed, not followed
    assert _spawned_during(lambda: treescan.remove_trees([small])) == []
    assert not small.exists()
    assert (outside / "keep.txt").read_text() == "kept"


def test_a_big_tree_still_goes_to_rm(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for i in range(treescan.SMALL_TREE + 5):
        (big / f"f{i}").write_text("")
    spawned = _spawned_during(lambda: treescan.remove_trees([big]))
    assert not big.exists()
    assert any("rm" in cmd for cmd in spawned)


def test_a_lone_file_is_unlinked_and_a_missing_path_is_nothing_to_do(tmp_path: Path) -> None:
    lone = tmp_path / "lone.txt"
    lone.write_text("x")
    treescan.remove_trees([lone, tmp_path / "missing"])
    assert not lone.exists()
