"""Renaming a directory that existed before the branch (``git mv dir``, ``os.rename``).

As root, overlay views are mounted with ``redirect_dir=on``: the rename works in the
branch and the commit publishes the directory's full content (which lives in the lower
directory named by the redirect xattr). Unprivileged overlay cannot (userxattr allows
no redirects): the rename fails with EXDEV as before, and ``Workspace.dir_renames``
says so. Copy and reflink rename real directories.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from branching_core import ConflictError, Workspace
from branching_core.errors import BackendUnavailableError
from tests.support.unprivileged import (
    assert_scenario_ok,
    chown_tree,
    make_world_readable_root,
    requires_unprivileged,
    run_as_nobody,
)
from tests.workspace.treeutil import make_repo_like_tree, snapshot


def _renames(view: Path) -> None:
    os.rename(view / "olddir", view / "newdir")  # plain rename(2), no copy fallback
    (view / "newdir" / "inner" / "x.txt").write_text("x changed\n")
    (view / "newdir" / "added.txt").write_text("added\n")
    (view / "holder").mkdir()
    os.rename(view / "docs", view / "holder" / "docs")  # into a directory made here
    os.rename(view / "src" / "pkg", view / "src" / "package")  # nested, copied-up parent
    (view / "src" / "package" / "core.py").unlink()


def _needs_dir_renames(ws: Workspace) -> None:
    if not ws.dir_renames:
        pytest.skip(f"directory renames unavailable here: {ws.dir_renames_why}")


def test_directory_renames_commit_their_whole_content(fs_root: Path, backend: str) -> None:
    ws_dir = fs_root / "ws"
    ws_dir.mkdir()
    make_repo_like_tree(ws_dir)
    expected_dir = fs_root / "expected"
    shutil.copytree(ws_dir, expected_dir, symlinks=True)
    _renames(expected_dir)
    ws = Workspace(ws_dir, backend=backend)
    _needs_dir_renames(ws)
    with ws.branch("mv") as branch:
        _renames(branch.path)
        changes = branch.changes()
        assert "olddir" in changes.deleted
        assert {"newdir/inner/x.txt", "newdir/added.txt", "holder/docs/guide.md"} <= set(
            changes.created
        )
        assert snapshot(branch.path) == snapshot(expected_dir)
    assert snapshot(ws_dir) == snapshot(expected_dir)
    assert ws.tree.store.branch_ids() == []


def test_nested_branches_rename_and_commit_up_the_stack(fs_root: Path, backend: str) -> None:
    ws_dir = fs_root / "ws"
    ws_dir.mkdir()
    make_repo_like_tree(ws_dir)
    ws = Workspace(ws_dir, backend=backend)
    _needs_dir_renames(ws)
    with ws.branch("outer") as outer:
        os.rename(outer.path / "olddir", outer.path / "middle")
        with outer.branch("inner") as inner:
            os.rename(inner.path / "middle", inner.path / "final")
            (inner.path / "final" / "inner" / "y.txt").write_text("y\n")
        assert (outer.path / "final" / "inner" / "x.txt").read_text() == "x\n"
    assert (ws_dir / "final" / "inner" / "x.txt").read_text() == "x\n"
    assert (ws_dir / "final" / "inner" / "y.txt").read_text() == "y\n"
    assert not (ws_dir / "olddir").exists() and not (ws_dir / "middle").exists()


def test_renamed_directory_changed_by_a_third_party_is_a_conflict(
    ws_dir: Path, backend: str
) -> None:
    ws = Workspace(ws_dir, backend=backend)
    _needs_dir_renames(ws)
    branch = ws.branch("mv")
    time.sleep(0.02)
    os.rename(branch.path / "sub", branch.path / "moved")
    (ws_dir / "sub" / "b.txt").write_text("edited by the user\n")
    with pytest.raises(ConflictError):
        branch.commit()
    assert (ws_dir / "sub" / "b.txt").read_text() == "edited by the user\n"
    assert not (ws_dir / "moved").exists()
    branch.abort()


def test_a_durable_branch_keeps_its_renames_across_reopen(fs_root: Path, backend: str) -> None:
    ws_dir = fs_root / "ws"
    ws_dir.mkdir()
    make_repo_like_tree(ws_dir)
    ws = Workspace(ws_dir, backend=backend)
    _needs_dir_renames(ws)
    branch = ws.branch("keep", durable=True)
    os.rename(branch.path / "olddir", branch.path / "newdir")
    ws.close()
    again = Workspace(ws_dir, backend=backend)
    reopened = again.open_branch(branch.id)
    assert (reopened.path / "newdir" / "inner" / "x.txt").read_text() == "x\n"
    assert not (reopened.path / "olddir").exists()
    reopened.commit()
    assert (ws_dir / "newdir" / "inner" / "x.txt").read_text() == "x\n"


def test_root_overlay_reports_directory_renames(tmp_path: Path) -> None:
    ws_dir = tmp_path / "ws"
    ws_dir.mkdir()
    try:
        ws = Workspace(ws_dir, backend="overlay")
    except BackendUnavailableError as exc:
        pytest.skip(f"overlay unavailable here: {exc}")
    if os.geteuid() != 0:
        assert not ws.dir_renames and "userxattr" in ws.dir_renames_why
    else:
        assert ws.dir_renames, ws.dir_renames_why


UNPRIVILEGED = r"""
import errno, os, sys
from pathlib import Path
from branching_core import Workspace
ws = Workspace(Path(sys.argv[1]), backend="overlay")
assert ws.fstype == "overlay", ws.passed_over
assert not ws.dir_renames and "EXDEV" in ws.dir_renames_why, ws.dir_renames_why
with ws.branch("mv") as b:
    try:
        os.rename(b.path / "olddir", b.path / "newdir")
        raise SystemExit("a lower directory was renamed without redirect_dir")
    except OSError as exc:
        assert exc.errno == errno.EXDEV, exc
print("ok exdev")
"""


@requires_unprivileged
@pytest.mark.unprivileged
def test_unprivileged_overlay_keeps_exdev_and_says_so() -> None:
    root = make_world_readable_root()
    ws_dir = root / "ws"
    (ws_dir / "olddir").mkdir(parents=True)
    (ws_dir / "olddir" / "x.txt").write_text("x\n")
    chown_tree(ws_dir)
    proc = run_as_nobody(UNPRIVILEGED, root=root, args=[str(ws_dir)])
    assert assert_scenario_ok(proc).strip() == "ok exdev"
