"""A disposed branch is gone at once; its store directory is removed in the background,
and never left behind: not at interpreter exit, not after a kill (next open sweeps it)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from branching_core.workspace import Workspace, reaper

REPO = Path(__file__).resolve().parents[2]


def _trash(ws: Workspace) -> list[Path]:
    trash = ws.tree.store.root / "trash"
    return sorted(trash.iterdir()) if trash.exists() else []


def _many_files(ws_dir: Path, count: int) -> None:
    for i in range(count):
        (ws_dir / f"d{i % 20}").mkdir(exist_ok=True)
        (ws_dir / f"d{i % 20}" / f"f{i}.txt").write_text(f"{i}\n")


def test_abort_and_commit_leave_no_branch_directory_and_the_trash_empties(
    ws_dir: Path, backend: str
) -> None:
    _many_files(ws_dir, 200)
    ws = Workspace(ws_dir, backend=backend)
    aborted, committed = ws.branch("a"), ws.branch("c")
    (committed.path / "new.txt").write_text("new\n")
    dirs = [ws.tree.store.branch_dir(aborted.id), ws.tree.store.branch_dir(committed.id)]
    aborted.abort()
    committed.commit()
    assert (ws_dir / "new.txt").read_text() == "new\n"
    assert not any(d.exists() for d in dirs)  # gone from the store at once
    assert ws.tree.store.branch_ids() == []
    assert ws.list_branches() == []
    assert reaper.drain(timeout=60)
    assert _trash(ws) == []


def _child(ws_dir: Path, store: Path, tail: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from branching_core.workspace import Workspace
        ws = Workspace({str(ws_dir)!r}, backend="copy", store={str(store)!r})
        for i in range(3):
            ws.branch(f"b{{i}}").abort()
        {tail}
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_interpreter_exit_waits_for_the_background_removals(tmp_path: Path) -> None:
    ws_dir = tmp_path / "ws"
    ws_dir.mkdir()
    _many_files(ws_dir, 2000)
    store = tmp_path / "store"
    done = _child(ws_dir, store, "")
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (store / "trash").iterdir()] == []
    assert [p.name for p in store.iterdir() if "-" in p.name] == []


def test_a_kill_before_the_removals_leaves_trash_the_next_open_sweeps(tmp_path: Path) -> None:
    ws_dir = tmp_path / "ws"
    ws_dir.mkdir()
    _many_files(ws_dir, 2000)
    store = tmp_path / "store"
    killed = _child(ws_dir, store, "os.kill(os.getpid(), signal.SIGKILL)")
    assert killed.returncode == -signal.SIGKILL
    ws = Workspace(ws_dir, backend="copy", store=store)  # the dead session's trash goes
    assert _trash(ws) == []
    assert ws.tree.store.branch_ids() == []
    assert sorted(p.name for p in ws_dir.iterdir()) == [f"d{i}" for i in sorted(range(20), key=str)]
