"""Stores of deleted workspaces are collected; stores in use never are."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from branching_core import Workspace
from branching_core.workspace.store import default_store_root
from branching_core.workspace.store_gc import STAMP, sweep_orphan_stores
from tests.workspace.test_crash_safety import REPO

MAKE_STORE = """
import sys
from branching_core import Workspace
ws = Workspace(sys.argv[1], backend="copy")
with ws.branch("b", durable=True) as branch:
    (branch.path / "f.txt").write_text("f")
ws.branch("kept", durable=True)
print(ws.tree.store.root)
"""


def _store_of(ws_dir: Path) -> Path:
    """A store with a durable branch, made (and left) by a process that has exited."""
    done = subprocess.run(
        [sys.executable, "-c", MAKE_STORE, str(ws_dir)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return Path(done.stdout.strip())


def test_orphaned_stores_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    alive_dir, gone_dir, held_dir = (tmp_path / n for n in ("alive", "gone", "held"))
    for d in (alive_dir, gone_dir, held_dir):
        d.mkdir()
    alive, gone, held = (_store_of(d) for d in (alive_dir, gone_dir, held_dir))
    base = alive.parent
    assert gone.parent == base == held.parent
    foreign = base / "not-ours"
    foreign.mkdir()  # no workspace marker: never guessed at

    shutil.rmtree(gone_dir)
    shutil.rmtree(held_dir)
    # a process still holds a session of the held store (it runs in a deleted directory)
    fd = os.open(held / "sessions" / "live.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        removed = sweep_orphan_stores(base, interval_s=0)
    finally:
        os.close(fd)
    assert removed == [gone]
    assert not gone.exists()
    assert alive.exists() and held.exists() and foreign.exists()
    assert [p.name for p in base.iterdir() if p.name.startswith(".gc-")] == []


def test_opening_a_workspace_sweeps_at_most_hourly(tmp_path: Path) -> None:
    gone_dir = tmp_path / "gone"
    gone_dir.mkdir()
    gone = _store_of(gone_dir)
    shutil.rmtree(gone_dir)
    (gone.parent / STAMP).unlink(missing_ok=True)
    other = tmp_path / "other"
    other.mkdir()
    Workspace(other, backend="copy")
    assert not gone.exists()
    assert default_store_root(other.resolve()).exists()

    again = tmp_path / "again"
    again.mkdir()
    store = _store_of(again)
    shutil.rmtree(again)
    Workspace(other, backend="copy")  # swept less than an hour ago: left for later
    assert store.exists()
    assert sweep_orphan_stores(store.parent, interval_s=0) == [store]
