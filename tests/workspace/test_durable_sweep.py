"""Durable branches nobody will reopen can be listed with their age and discarded.

What the fork layer needs to sweep the durable branches a killed ``fork()`` left
before its manifest existed: ``Workspace.list_branches()`` (each ``BranchInfo`` with
``created_ns`` and ``owner_alive``) and ``Workspace.discard_branch(id)``.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from branching_core import Workspace
from branching_core.errors import BranchError, BranchNotFoundError
from tests.workspace.test_crash_safety import _run_child, _seed, _wait_gone
from tests.workspace.treeutil import snapshot


def test_list_and_discard_a_dead_process_durable_branch(fs_root: Path, backend: str) -> None:
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    before = snapshot(ws_dir)
    started = time.time_ns()
    child = _run_child("leave-open", str(ws_dir), backend)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    info = json.loads(out.splitlines()[0])
    assert _wait_gone(info["helper"])

    ws = Workspace(ws_dir, backend=backend)
    nested = ws.open_branch(info["durable"]).branch("inner", durable=True)
    (nested.path / "n.txt").write_text("n")
    ws.close()  # unmount both; they stay in the store
    ws = Workspace(ws_dir, backend=backend)
    listed = {b.id: b for b in ws.list_branches()}
    keeper = listed[info["durable"]]
    assert keeper.durable and not keeper.owner_alive and not keeper.open_here
    assert started <= keeper.created_ns <= time.time_ns()
    assert len(listed) == 2

    ws.discard_branch(info["durable"])  # takes the nested one with it
    assert ws.list_branches() == []
    assert ws.tree.store.branch_ids() == []
    assert snapshot(ws_dir) == before
    with pytest.raises(BranchNotFoundError):
        ws.discard_branch(info["durable"])


def test_a_live_process_durable_branch_is_refused(fs_root: Path, backend: str) -> None:
    ws_dir = fs_root / "ws"
    _seed(ws_dir)
    child = _run_child("leave-open", str(ws_dir), backend, "hang", stdin=subprocess.PIPE)
    assert child.stdout is not None
    info = json.loads(child.stdout.readline())
    try:
        ws = Workspace(ws_dir, backend=backend)
        with pytest.raises(BranchError, match="running process"):
            ws.discard_branch(info["durable"])
        assert info["durable"] in ws.tree.store.branch_ids()
    finally:
        child.kill()
        child.wait(timeout=30)


def test_discarding_a_branch_open_here_aborts_it(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    branch = ws.branch("d", durable=True)
    ws.discard_branch(branch.id)
    assert branch.state == "aborted" and ws.tree.store.branch_ids() == []
