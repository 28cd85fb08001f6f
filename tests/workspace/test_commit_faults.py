"""An exception at any step of a commit leaves the parent exactly before or after it.

SIGKILL is covered by test_crash_safety; here the commit keeps running and meets a
``KeyboardInterrupt`` (finished, then re-raised) or an ``OSError`` such as EIO, ENOSPC
or EACCES (rolled back from what it displaced, reported as ``CommitError``), injected
at every journal step with ``FORKDECK_CRASH_WITH``. Either way nothing is left to the
next open but, at worst, a journal that finishes the same way; and cleanup (the
``with`` block, the pattern runner, interpreter exit) never throws away a branch whose
journal still needs it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from branching_core import CommitError, Workspace
from tests.support.unprivileged import (
    assert_scenario_ok,
    chown_tree,
    make_world_readable_root,
    requires_unprivileged,
    run_as_nobody,
)
from tests.workspace.faultinject import commit_under_fault, inject_fault
from tests.workspace.scenario import agent_edits
from tests.workspace.test_crash_safety import CRASH_POINTS, _seed
from tests.workspace.treeutil import snapshot

STEPS = [p for p in CRASH_POINTS if p != "staged"] + ["finishing"]
FAULTS = ["interrupt", "eio", "enospc", "eacces"]


def _expected(ws_dir: Path, tmp: Path) -> tuple[dict, dict]:
    before = snapshot(ws_dir)
    expected_dir = tmp / "expected"
    shutil.copytree(ws_dir, expected_dir, symlinks=True)
    agent_edits(expected_dir)
    return before, snapshot(expected_dir)


def _assert_clean(ws: Workspace) -> None:
    assert list(ws.tree.store.journal_dir.iterdir()) == []
    assert ws.tree.store.branch_ids() == []
    assert not (ws.path / ".pydantic-deep").exists()
    assert not (ws.tree.store.root / "failed").exists()


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("step", STEPS)
def test_fault_during_commit_is_all_or_nothing(
    fs_root: Path, backend: str, step: str, fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    before, after = _expected(ws_dir, fs_root)
    ws = Workspace(ws_dir, backend=backend)
    branch, raised = commit_under_fault(ws, monkeypatch, step, fault, agent_edits)
    state = snapshot(ws_dir)

    if fault == "interrupt":
        # Ctrl-C after the commit point: the commit finishes, then the interrupt is raised.
        assert isinstance(raised, KeyboardInterrupt)
        assert state == after
        assert branch.state == "committed"
    elif step == "finishing":
        # The journal is gone: the commit is complete; leftover scratch is for recovery.
        assert raised is None and branch.state == "committed"
        assert state == after
    else:
        assert isinstance(raised, CommitError), raised
        assert "rolled back" in str(raised) or "nothing was applied" in str(raised)
        assert state == before
        assert branch.state == "aborted"  # the with block threw the branch away after
    reopened = Workspace(ws_dir, backend=backend)
    assert snapshot(ws_dir) == (after if fault == "interrupt" or step == "finishing" else before)
    _assert_clean(reopened)


def test_a_commit_left_pending_keeps_its_sources_until_the_replay(
    fs_root: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forward fails, then the rollback fails too: the branch (and the sources it holds)
    survive the ``with`` block's cleanup and interpreter-exit cleanup; the next open
    finishes it."""
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    before, _ = _expected(ws_dir, fs_root)
    ws = Workspace(ws_dir, backend=backend)
    inject_fault(monkeypatch, "op:3", "eio")
    with ws.branch("stuck") as branch:
        agent_edits(branch.path)
        # the rollback's first undo fails as well: neither direction can finish here
        from branching_core.workspace import journal as journal_module

        real = journal_module.crash_point

        def both(name: str) -> None:
            real(name)
            if name == "undo:7":
                raise OSError(5, "injected EIO during rollback")

        monkeypatch.setattr(journal_module, "crash_point", both)
        with pytest.raises(CommitError, match="next opened"):
            branch.commit()
    monkeypatch.delenv("FORKDECK_CRASH_AT")
    monkeypatch.setattr(journal_module, "crash_point", real)
    assert branch.state == "pending"
    assert ws.tree.store.branch_dir(branch.id).exists(), "cleanup disposed a branch mid-commit"
    ws.close()  # what interpreter exit runs
    assert ws.tree.store.branch_dir(branch.id).exists()
    reopened = Workspace(ws_dir, backend=backend)
    # the journal was marked for rollback when forward failed: the replay finishes that
    assert snapshot(ws_dir) == before
    _assert_clean(reopened)


@pytest.mark.parametrize("backend_name", ["overlay", "copy"])
def test_read_only_directory_refuses_the_commit_cleanly_as_root_too(
    tmp_path: Path, backend_name: str
) -> None:
    """A read-only *filesystem* stops root as well: refused before the commit point."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a read-only tmpfs")
    ro = tmp_path / "ws" / "ro"
    ro.mkdir(parents=True)
    (tmp_path / "ws" / "a.txt").write_text("a\n")
    if os.system(f"mount -t tmpfs -o size=1m tmpfs {ro} 2>/dev/null") != 0:
        pytest.skip("cannot mount tmpfs here")
    try:
        (ro / "f.txt").write_text("f\n")
        os.system(f"mount -o remount,ro {ro}")
        ws = Workspace(tmp_path / "ws", backend=backend_name)
        before = snapshot(tmp_path / "ws")
        branch = ws.branch("edit")
        (branch.path / "a.txt").write_text("changed\n")
        try:
            (branch.path / "ro" / "new.txt").write_text("new\n")
        except OSError:
            pytest.skip("this backend's view of a read-only mount is read-only too")
        with pytest.raises(CommitError, match="nothing was applied"):
            branch.commit()
        assert snapshot(tmp_path / "ws") == before
        assert branch.is_open
        branch.abort()
    finally:
        os.system(f"umount -l {ro}")


UNPRIVILEGED_FAULTS = r"""
import os, shutil, sys
from pathlib import Path
from branching_core import Workspace, CommitError
from branching_core.workspace.faults import reset_injected_faults

ws_dir, backend, steps, faults = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

def seed(root):
    if root.exists():
        shutil.rmtree(root)
    root.mkdir()
    (root / "a.txt").write_text("a\n"); (root / "c.txt").write_text("c\n")
    (root / "sub").mkdir(); (root / "sub" / "b.txt").write_text("b\n")
    (root / "gone").mkdir(); (root / "gone" / "x.txt").write_text("x\n")

def edits(view):
    (view / "a.txt").write_text("a changed\n"); (view / "new.txt").write_text("new\n")
    (view / "sub" / "b.txt").unlink()
    (view / "fresh" / "deep").mkdir(parents=True)
    (view / "fresh" / "deep" / "f.txt").write_text("f\n")
    shutil.rmtree(view / "gone"); (view / "gone").write_text("was a directory\n")
    os.chmod(view / "sub", 0o700); (view / "c.txt").write_text("c changed\n")

def snap(root):
    out = {}
    for d, dirs, files in os.walk(root):
        if d == str(root):
            dirs[:] = [x for x in dirs if x != ".pydantic-deep"]
        for n in dirs + files:
            p = os.path.join(d, n); st = os.lstat(p)
            data = open(p, "rb").read() if os.path.isfile(p) else b""
            out[os.path.relpath(p, root)] = (st.st_mode, data)
    return out

seed(ws_dir); before = snap(ws_dir)
exp = ws_dir.with_name("expected"); seed(exp); edits(exp); after = snap(exp)
count = 0
for step in steps.split(","):
    for fault in faults.split(","):
        seed(ws_dir)
        ws = Workspace(ws_dir, backend=backend)
        os.environ["FORKDECK_CRASH_AT"] = step; os.environ["FORKDECK_CRASH_WITH"] = fault
        reset_injected_faults()
        try:
            with ws.branch("faulty") as b:
                edits(b.path)
        except (KeyboardInterrupt, CommitError):
            pass
        del os.environ["FORKDECK_CRASH_AT"]
        want = after if fault == "interrupt" or step == "finishing" else before
        assert snap(ws_dir) == want, (step, fault)
        ws2 = Workspace(ws_dir, backend=backend)
        assert snap(ws_dir) == want, (step, fault)
        assert list(ws2.tree.store.journal_dir.iterdir()) == [], (step, fault)
        assert ws2.tree.store.branch_ids() == [], (step, fault)
        assert not (ws_dir / ".pydantic-deep").exists(), (step, fault)
        count += 1
print("ok", count)
"""

READ_ONLY_DIR = r"""
import os, sys
from pathlib import Path
from branching_core import Workspace, CommitError

ws_dir, backend = Path(sys.argv[1]), sys.argv[2]
ws = Workspace(ws_dir, backend=backend)
assert ws.fstype == backend, ws.passed_over
def snap():
    return {str(p.relative_to(ws_dir)): p.read_bytes() for p in ws_dir.rglob("*") if p.is_file()}
before = snap()
branch = ws.branch("edit")
(branch.path / "a.txt").write_text("changed\n")
(branch.path / "cache" / "mod.go").write_text("edited in a read-only directory\n")
try:
    branch.commit()
    raise SystemExit("a commit into a read-only directory went through")
except CommitError as exc:
    assert "nothing was applied" in str(exc), exc
    assert "cache" in str(exc), exc
assert snap() == before, "partial commit"
assert branch.is_open
branch.abort()
assert ws.tree.store.branch_ids() == []
print("ok refused")
"""


@requires_unprivileged
@pytest.mark.unprivileged
@pytest.mark.parametrize("backend_name", ["overlay", "copy"])
def test_faults_as_an_unprivileged_user(backend_name: str) -> None:
    root = make_world_readable_root()
    ws_dir = root / "work" / "ws"
    ws_dir.parent.mkdir()
    chown_tree(ws_dir.parent)
    proc = run_as_nobody(
        UNPRIVILEGED_FAULTS,
        root=root,
        args=[str(ws_dir), backend_name, ",".join(STEPS), ",".join(FAULTS)],
        timeout=600,
    )
    assert assert_scenario_ok(proc).strip() == f"ok {len(STEPS) * len(FAULTS)}"


@requires_unprivileged
@pytest.mark.unprivileged
@pytest.mark.parametrize("backend_name", ["overlay", "copy"])
def test_read_only_directory_is_a_clean_commit_error_unprivileged(backend_name: str) -> None:
    """A Go module cache style read-only directory: refused, nothing applied."""
    root = make_world_readable_root()
    ws_dir = root / "ws"
    (ws_dir / "cache").mkdir(parents=True)
    (ws_dir / "cache" / "mod.go").write_text("package mod\n")
    (ws_dir / "a.txt").write_text("a\n")
    chown_tree(ws_dir)
    os.chmod(ws_dir / "cache" / "mod.go", 0o644)
    os.chmod(ws_dir / "cache", 0o555)
    proc = run_as_nobody(READ_ONLY_DIR, root=root, args=[str(ws_dir), backend_name])
    assert assert_scenario_ok(proc).strip() == "ok refused"


@pytest.mark.parametrize("fault", ["interrupt", "eio"])
def test_pattern_runner_cleanup_leaves_the_parent_whole(
    ws_dir: Path, backend: str, fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BestOfN commits its winner in finalize; a fault mid-commit goes through the
    runner's cleanup (close aborts every branch still open), which must not dispose a
    branch whose journal is unfinished."""
    from branching_core.patterns import BestOfN

    def writer(tag: str) -> object:
        def run(path: Path) -> tuple[bool, float]:
            for i in range(6):
                (path / f"{tag}{i}.txt").write_text(tag)
            (path / "a.txt").write_text(tag)
            return True, 1.0 if tag == "w" else 0.5

        return run

    ws = Workspace(ws_dir, backend=backend)
    before = snapshot(ws_dir)
    inject_fault(monkeypatch, "op:3", fault)
    with pytest.raises(KeyboardInterrupt if fault == "interrupt" else CommitError):
        BestOfN([writer("w"), writer("l")])(ws)
    monkeypatch.delenv("FORKDECK_CRASH_AT")
    state = snapshot(ws_dir)
    if fault == "interrupt":
        assert {f"w{i}.txt" for i in range(6)} <= set(state)
        assert (ws_dir / "a.txt").read_text() == "w"
    else:
        assert state == before
    reopened = Workspace(ws_dir, backend=backend)
    assert snapshot(ws_dir) == state
    _assert_clean(reopened)
