"""A commit killed by SIGKILL at any step leaves the parent exactly before or after it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from branching_core import Workspace
from tests.workspace.scenario import agent_edits
from tests.workspace.treeutil import snapshot

REPO = Path(__file__).resolve().parents[2]
# The scenario's commit applies eight operations on every backend (see agent_edits).
CRASH_POINTS = ["staged", "journaled", *[f"op:{i}" for i in range(8)], "applied"]


def _seed(root: Path) -> None:
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    (root / "c.txt").write_text("c\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("b\n")
    (root / "gone").mkdir()
    (root / "gone" / "x.txt").write_text("x\n")


def _run_child(
    *args: str, env_extra: dict[str, str] | None = None, **kw: object
) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.workspace.scenario", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[call-overload]
    )


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("crash_at", [*CRASH_POINTS, "finishing"])
def test_sigkill_during_commit_is_all_or_nothing(
    fs_root: Path, backend: str, crash_at: str
) -> None:
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    before = snapshot(ws_dir)
    expected_dir = fs_root / "expected"
    shutil.copytree(ws_dir, expected_dir, symlinks=True)
    agent_edits(expected_dir)
    after = snapshot(expected_dir)

    child = _run_child("commit", str(ws_dir), backend, env_extra={"FORKDECK_CRASH_AT": crash_at})
    out, err = child.communicate(timeout=60)
    assert child.returncode != 0 or "committed" not in out, (
        f"the commit ran through without reaching step {crash_at}: CRASH_POINTS is stale"
    )
    assert child.returncode == -signal.SIGKILL, err

    ws = Workspace(ws_dir, backend=backend)  # opening recovers
    state = snapshot(ws_dir)
    assert state == (before if crash_at == "staged" else after)
    assert list(ws.tree.store.journal_dir.iterdir()) == []
    assert ws.tree.store.branch_ids() == []
    # the commit made .pydantic-deep for its scratch: recovery removes it again
    assert not (ws_dir / ".pydantic-deep").exists()


def test_recovery_removes_half_written_journal_and_generation_files(
    fs_root: Path, backend: str
) -> None:
    """A writer killed between creating its temp file and renaming it leaves the temp."""
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    ws = Workspace(ws_dir, backend=backend)
    store = ws.tree.store
    (store.journal_dir / ".abcd-1.json.tmp-999999").write_text('{"half":')
    (store.root / "gen" / ".root.tmp").write_text("")
    Workspace(ws_dir, backend=backend)
    assert list(store.journal_dir.iterdir()) == []
    assert [p.name for p in (store.root / "gen").iterdir() if p.name.startswith(".")] == []


def test_crash_after_staging_leaves_no_state_dir(fs_root: Path, backend: str) -> None:
    """A commit that staged (cross-device sources) and died before its journal."""
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    Workspace(ws_dir, backend=backend)
    scratch = ws_dir / ".pydantic-deep" / "commit" / "dead0000-1"
    (scratch / "staged").mkdir(parents=True)
    (scratch / "staged" / "0").write_text("staged\n")
    (scratch / ".made-state-dir").touch()
    Workspace(ws_dir, backend=backend)
    assert not (ws_dir / ".pydantic-deep").exists()


def test_normal_exit_and_crash_leave_nothing_but_durable_branches(
    fs_root: Path, backend: str
) -> None:
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    before = snapshot(ws_dir)

    # normal exit: the ordinary branch is aborted, the durable one survives
    child = _run_child("leave-open", str(ws_dir), backend)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    info = json.loads(out.splitlines()[0])
    assert _wait_gone(info["helper"]), "the mount helper outlived its owner"

    ws = Workspace(ws_dir, backend=backend)
    listed = ws.list_branches()
    assert [(b.name, b.durable, b.owner_alive) for b in listed] == [("keeper", True, False)]
    keeper = ws.open_branch(info["durable"])
    assert (keeper.path / "kept.txt").read_text() == "kept"
    keeper.commit()
    assert (ws_dir / "kept.txt").read_text() == "kept"
    (ws_dir / "kept.txt").unlink()
    assert snapshot(ws_dir) == before

    # SIGKILL with branches open: mounts vanish with the helper, stores are swept
    child = _run_child("leave-open", str(ws_dir), backend, "hang", stdin=subprocess.PIPE)
    assert child.stdout is not None
    info = json.loads(child.stdout.readline())
    child.kill()
    child.wait(timeout=30)
    assert _wait_gone(info["helper"]), "a SIGKILLed owner left its mount helper (and mounts) behind"
    ws = Workspace(ws_dir, backend=backend)
    assert [b.name for b in ws.list_branches()] == ["keeper"]
    ws.open_branch(info["durable"]).abort()
    assert ws.tree.store.branch_ids() == []
    assert snapshot(ws_dir) == before
