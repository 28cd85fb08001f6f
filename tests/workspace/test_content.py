"""What real repositories hold survives a branch round-trip on every backend."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

from branching_core import Workspace
from tests.workspace.treeutil import make_repo_like_tree, snapshot

BIG_BINARY = random.Random(7).randbytes(8 * 1024 * 1024)


def _edit_like_an_agent(view: Path) -> None:
    os.rename(view / "docs" / "guide.md", view / "docs" / "manual.md")  # file rename
    # Directory rename: overlayfs without redirect_dir answers EXDEV to rename(2) of a
    # lower directory; mv and shutil.move fall back to copy+delete, which must commit right.
    subprocess.run(["mv", str(view / "olddir"), str(view / "newdir")], check=True)
    shutil.move(str(view / "src" / "pkg"), str(view / "src" / "package"))
    shutil.rmtree(view / "becomes_file")
    (view / "becomes_file").write_text("now a file\n")
    (view / "becomes_dir").unlink()
    (view / "becomes_dir").mkdir()
    (view / "becomes_dir" / "inside.txt").write_text("inside\n")
    shutil.rmtree(view / "recreated")
    (view / "recreated").mkdir()
    (view / "recreated" / "fresh.txt").write_text("fresh\n")
    (view / "new_empty").mkdir()
    os.chmod(view / "run.sh", 0o700)
    os.chmod(view / "a.txt", 0o755)
    (view / "big.bin").write_bytes(BIG_BINARY)
    (view / "ünïcode name.txt").write_text("ü changed\n")
    (view / "name with spaces.md").write_text("spaced\n")
    (view / "link_out").symlink_to("/etc/hostname")
    (view / "link_in").unlink()
    (view / "link_in").symlink_to("a.txt")


def test_repo_like_edits_commit_exactly(fs_root: Path, backend: str) -> None:
    ws_dir = fs_root / "repo"
    ws_dir.mkdir()
    make_repo_like_tree(ws_dir)
    expected_dir = fs_root / "expected"
    shutil.copytree(ws_dir, expected_dir, symlinks=True)
    _edit_like_an_agent(expected_dir)
    ws = Workspace(ws_dir, backend=backend)
    with ws.branch("agent") as b:
        _edit_like_an_agent(b.path)
        assert snapshot(b.path) == snapshot(expected_dir)
        # git's own files are the repository, never a change (issue 25): the index the
        # branch's git rewrote stays with the branch
        (b.path / ".git" / "index").write_bytes(b"DIRC\x00\x00\x00\x02")
        assert ".git/index" not in b.changes().all_paths
    assert snapshot(ws_dir) == snapshot(expected_dir)
    # Symlinks stay links (never followed out of the workspace), bits survive.
    assert os.readlink(ws_dir / "link_out") == "/etc/hostname"
    assert os.stat(ws_dir / "run.sh").st_mode & 0o777 == 0o700
    assert not [n for n in os.listxattr(ws_dir / "a.txt") if n.startswith("user.overlay.")]


def test_large_new_file_is_committed_by_rename_without_changing_bytes(
    fs_root: Path, backend: str
) -> None:
    ws_dir = fs_root / "ws"
    ws_dir.mkdir()
    ws = Workspace(ws_dir, backend=backend)
    payload = os.urandom(1024 * 1024) * 32
    with ws.branch("big") as b:
        (b.path / "model.bin").write_bytes(payload)
        inode_in_store = None
        if backend != "overlay":
            inode_in_store = os.stat(b.path / "model.bin").st_ino
    assert (ws_dir / "model.bin").read_bytes() == payload
    if inode_in_store is not None:
        assert os.stat(ws_dir / "model.bin").st_ino == inode_in_store  # moved, not copied
