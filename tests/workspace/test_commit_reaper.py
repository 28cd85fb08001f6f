"""A commit over many existing files: the fast first pass (one ``link`` and one ``rename``
per put) and the old copies handed to the background reaper after the commit point.

The guarantees are those of every commit (``test_crash_safety``, ``test_commit_faults``):
SIGKILL or Ctrl-C at any step leaves the parent fully before or after, a failing disk rolls
it back from the old copies the first pass kept, and nothing is left behind once the
workspace is opened again. These cover the commit large enough to take the reaper path
(``journal.REAP_FROM_OPS``), which the eight-op scenario of those modules does not.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from branching_core import CommitError, Workspace
from branching_core.workspace import reaper
from branching_core.workspace.journal import REAP_FROM_OPS
from tests.workspace.faultinject import commit_under_fault
from tests.workspace.treeutil import Snapshot, snapshot

REPO = Path(__file__).resolve().parents[2]
FILES = REAP_FROM_OPS * 3


def _seed(root: Path) -> None:
    (root / "d").mkdir(parents=True, exist_ok=True)
    for i in range(FILES):
        (root / "d" / f"f{i}.txt").write_text(f"old {i}\n")
    (root / "keep.txt").write_text("kept\n")


def _edit(root: Path) -> None:
    """Replace every seeded file, delete one, add one: all kinds of displacing op."""
    for i in range(FILES):
        (root / "d" / f"f{i}.txt").write_text(f"new {i}\n")
    (root / "keep.txt").unlink()
    (root / "d" / "added.txt").write_text("added\n")


def _expected(ws_dir: Path) -> tuple[Snapshot, Snapshot]:
    before = snapshot(ws_dir)
    _edit(ws_dir)
    after = snapshot(ws_dir)
    for rel in ["d/added.txt"]:
        (ws_dir / rel).unlink()
    _seed(ws_dir)
    assert snapshot(ws_dir) == before
    return before, after


def _trash(ws: Workspace) -> list[str]:
    trash = ws.tree.store.root / "trash"
    return sorted(p.name for p in trash.iterdir()) if trash.exists() else []


def test_old_copies_are_removed_in_the_background(fs_root: Path, backend: str) -> None:
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    _, after = _expected(ws_dir)
    ws = Workspace(ws_dir, backend=backend)
    with ws.branch("many") as branch:
        _edit(branch.path)
    assert branch.state == "committed"
    assert snapshot(ws_dir) == after
    # the commit's scratch left the workspace at once; its old copies go with the reaper
    assert not (ws_dir / ".pydantic-deep").exists()
    assert reaper.drain(timeout=60)
    assert _trash(ws) == []
    assert list(ws.tree.store.journal_dir.iterdir()) == []


@pytest.mark.parametrize("step", ["op:3", "finishing", "scratch-reaped"])
def test_sigkill_around_the_hand_over_is_all_or_nothing(
    fs_root: Path, backend: str, step: str
) -> None:
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    _, after = _expected(ws_dir)
    Workspace(ws_dir, backend=backend)
    script = (
        "import sys; from pathlib import Path; from branching_core import Workspace;"
        "from tests.workspace.test_commit_reaper import _edit;"
        "ws = Workspace(Path(sys.argv[1]), backend=sys.argv[2]);"
        "b = ws.branch('many'); _edit(b.path); b.commit(); print('committed')"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "FORKDECK_CRASH_AT": step}
    child = subprocess.run(
        [sys.executable, "-c", script, str(ws_dir), backend],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert "committed" not in child.stdout, f"the commit never reached {step}"
    assert child.returncode == -signal.SIGKILL, child.stderr

    ws = Workspace(ws_dir, backend=backend)  # opening recovers and sweeps the dead's trash
    assert snapshot(ws_dir) == after
    assert not (ws_dir / ".pydantic-deep").exists()
    assert list(ws.tree.store.journal_dir.iterdir()) == []
    assert ws.tree.store.branch_ids() == []
    assert _trash(ws) == []


@pytest.mark.parametrize("fault", ["eio", "enospc", "interrupt"])
@pytest.mark.parametrize("step", ["op:0", f"op:{FILES // 2}", "applied"])
def test_fault_during_the_fast_first_pass(
    fs_root: Path, backend: str, step: str, fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk error half way rolls back from the old copies the first pass linked (every
    replaced file gets its old bytes back); Ctrl-C lets the commit finish, then raises."""
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    before, after = _expected(ws_dir)
    ws = Workspace(ws_dir, backend=backend)
    _branch, raised = commit_under_fault(ws, monkeypatch, step, fault, _edit)
    if fault == "interrupt":
        assert isinstance(raised, KeyboardInterrupt)
        assert snapshot(ws_dir) == after
    else:
        assert isinstance(raised, CommitError) and "rolled back" in str(raised), raised
        assert snapshot(ws_dir) == before
    assert not (ws_dir / ".pydantic-deep").exists()
    reopened = Workspace(ws_dir, backend=backend)
    assert snapshot(ws_dir) == (after if fault == "interrupt" else before)
    assert list(reopened.tree.store.journal_dir.iterdir()) == []
    assert reaper.drain(timeout=60)
    assert _trash(reopened) == []
