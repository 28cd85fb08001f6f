"""Third parties change the parent while a branch is open: conflicts, never damage.

Every case runs on every backend: the commit must raise ``ConflictError`` with nothing
applied (the branch stays open), and the workspace must keep opening afterwards, even
when an interrupted commit's journal can no longer be replayed (it is set aside).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from branching_core import ConflictError, Workspace
from branching_core.workspace.apply import changed_since
from branching_core.workspace.land import branch_files, land_files
from branching_core.workspace.store import Store
from tests.workspace.test_crash_safety import REPO, _seed
from tests.workspace.treeutil import snapshot

TICK = 0.02  # ctimes come from the kernel's coarse clock (one tick, 4 ms at HZ=250)


def _refused(ws: Workspace, branch_path_edit: object, third_party: object) -> None:
    branch = ws.branch("b")
    time.sleep(TICK)
    branch_path_edit(branch.path)  # type: ignore[operator]
    third_party(ws.path)  # type: ignore[operator]
    expected = snapshot(ws.path)
    with pytest.raises(ConflictError) as caught:
        branch.commit()
    assert caught.value.paths, "a conflict names the paths"
    assert snapshot(ws.path) == expected, "a refused commit applied something"
    assert branch.is_open
    branch.abort()
    Workspace(ws.path, backend=ws.fstype)  # reopens
    assert snapshot(ws.path) == expected


def test_new_file_in_a_directory_a_third_party_removed(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    _refused(
        ws,
        lambda view: (view / "sub" / "new.txt").write_text("new\n"),
        lambda parent: shutil.rmtree(parent / "sub"),
    )


def test_file_the_parent_turned_into_a_directory(ws_dir: Path, backend: str) -> None:
    def into_dir(parent: Path) -> None:
        (parent / "a.txt").unlink()
        (parent / "a.txt").mkdir()
        (parent / "a.txt" / "inner.txt").write_text("inner\n")

    ws = Workspace(ws_dir, backend=backend)
    _refused(ws, lambda view: (view / "a.txt").write_text("branch\n"), into_dir)


def test_file_the_parent_turned_into_an_empty_directory(ws_dir: Path, backend: str) -> None:
    def into_dir(parent: Path) -> None:
        (parent / "a.txt").unlink()
        (parent / "a.txt").mkdir()

    ws = Workspace(ws_dir, backend=backend)
    _refused(ws, lambda view: (view / "a.txt").write_text("branch\n"), into_dir)


def test_directory_the_parent_turned_into_a_file(ws_dir: Path, backend: str) -> None:
    def into_file(parent: Path) -> None:
        shutil.rmtree(parent / "sub")
        (parent / "sub").write_text("now a file\n")

    ws = Workspace(ws_dir, backend=backend)
    _refused(ws, lambda view: (view / "sub" / "c.txt").write_text("c\n"), into_file)


@pytest.mark.parametrize("action", ["delete", "rename"])
@pytest.mark.parametrize("order", ["branch-writes-first", "third-party-first"])
def test_third_party_delete_or_rename_is_not_overwritten(
    ws_dir: Path, backend: str, action: str, order: str
) -> None:
    def third_party(parent: Path) -> None:
        if action == "delete":
            (parent / "a.txt").unlink()
        else:
            (parent / "a.txt").rename(parent / "renamed.txt")

    def branch_writes(view: Path) -> None:
        (view / "a.txt").write_text("branch\n")

    ws = Workspace(ws_dir, backend=backend)
    branch = ws.branch("b")
    time.sleep(TICK)
    if order == "branch-writes-first":
        branch_writes(branch.path)
        third_party(ws_dir)
    else:
        third_party(ws_dir)
        branch_writes(branch.path)
    expected = snapshot(ws_dir)
    with pytest.raises(ConflictError) as caught:
        branch.commit()
    assert "a.txt" in caught.value.paths
    assert snapshot(ws_dir) == expected
    assert not (ws_dir / "a.txt").exists(), "the commit resurrected a deleted file"
    branch.abort()


def test_new_file_beside_an_unrelated_edit_still_commits(ws_dir: Path, backend: str) -> None:
    """The conservative overlay rule only looks at directories whose entries changed."""
    ws = Workspace(ws_dir, backend=backend)
    with ws.branch("b") as branch:
        time.sleep(TICK)
        (branch.path / "sub" / "new.txt").write_text("new\n")
        (ws_dir / "a.txt").write_text("edited in place by the user\n")
    assert (ws_dir / "sub" / "new.txt").read_text() == "new\n"
    assert (ws_dir / "a.txt").read_text() == "edited in place by the user\n"


def test_a_journal_that_cannot_be_replayed_is_set_aside(fs_root: Path, backend: str) -> None:
    """The store lost the sources of an interrupted commit: the next open reports it,
    keeps the journal in ``failed/`` and opens; the one after is silent."""
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    env = {**os.environ, "PYTHONPATH": str(REPO), "FORKDECK_CRASH_AT": "op:3"}
    child = subprocess.run(
        [sys.executable, "-m", "tests.workspace.scenario", "commit", str(ws_dir), backend],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == -9, child.stderr
    store = Store(ws_dir.resolve())  # found without opening (which would recover)
    for branch_id in store.branch_ids():
        shutil.rmtree(store.branch_dir(branch_id))  # what the old abort-on-exception did
    with pytest.warns(RuntimeWarning, match="set aside"):
        ws = Workspace(ws_dir, backend=backend)
    failed = list((store.root / "failed").iterdir())
    assert len(failed) == 1 and (failed[0] / "journal.json").exists()
    assert list(store.journal_dir.iterdir()) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Workspace(ws_dir, backend=backend)
    with ws.branch("after") as branch:  # and the workspace works
        (branch.path / "later.txt").write_text("later\n")
    assert (ws_dir / "later.txt").exists()


def test_an_unreadable_journal_is_set_aside(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    (ws.tree.store.journal_dir / "deadbeef-1.json").write_text("{not json")
    with pytest.warns(RuntimeWarning, match="unreadable journal"):
        Workspace(ws_dir, backend=backend)
    assert list(ws.tree.store.journal_dir.iterdir()) == []
    assert (ws.tree.store.root / "failed").exists()


def test_top_level_names_are_judged_exactly(ws_dir: Path, backend: str) -> None:
    """At the top level the engine itself adds ``.pydantic-deep`` (fork state) after the
    branches exist: a new top-level file is no conflict for that, a deleted one is."""
    ws = Workspace(ws_dir, backend=backend)
    branch = ws.branch("b")
    time.sleep(TICK)
    (ws_dir / ".pydantic-deep" / "forks").mkdir(parents=True)
    (branch.path / "brand_new.txt").write_text("new\n")
    branch.commit()
    assert (ws_dir / "brand_new.txt").read_text() == "new\n"


def test_path_by_path_apply_does_not_resurrect_third_party_deletes(
    ws_dir: Path, backend: str
) -> None:
    """``changed_since``/``branch_files`` + ``land_files`` (what a fork's stale winner and
    sub-agents use instead of a commit) flag the same paths as conflicts and leave them deleted."""
    ws = Workspace(ws_dir, backend=backend)
    branch = ws.branch("b")
    time.sleep(TICK)
    (ws_dir / "a.txt").unlink()
    shutil.rmtree(ws_dir / "sub")
    (branch.path / "a.txt").write_text("branch\n")
    (branch.path / "sub").mkdir(exist_ok=True)  # overlay's view lost it with the parent
    (branch.path / "sub" / "new.txt").write_text("new\n")
    (branch.path / "fine.txt").write_text("fine\n")
    changes = branch.changes()
    conflicts = changed_since(changes, ws_dir, branch.created_ns)
    assert "a.txt" in conflicts
    assert {"sub", "sub/new.txt"} & set(conflicts)
    files, dirs = branch_files(branch.path, changes, skip=set(conflicts))
    land_files(ws, files, dirs=dirs, since_ns=branch.created_ns, source_root=branch.path)
    assert not (ws_dir / "a.txt").exists() and not (ws_dir / "sub").exists()
    assert (ws_dir / "fine.txt").read_text() == "fine\n"
    branch.abort()
