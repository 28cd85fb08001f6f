"""Many create/write/abort cycles leak no mount, store directory or file descriptor."""

from __future__ import annotations

import os
from pathlib import Path

from branching_core import Workspace
from branching_core.workspace import reaper
from branching_core.workspace.mount_helper import shared_helper


def _helper_mounts(store_root: Path) -> list[str]:
    helper = shared_helper()
    with open(f"/proc/{helper.pid}/mountinfo") as fh:
        return [line for line in fh if str(store_root) in line]


def test_create_write_abort_cycles_leak_nothing(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    ws.branch("warm-up").abort()
    assert reaper.drain(timeout=60)  # discarded store directories go in the background
    fds_before = len(os.listdir("/proc/self/fd"))
    for i in range(200):
        b = ws.branch(f"cycle{i}")
        for j in range(3):
            (b.path / f"f{j}.txt").write_text(str(i))
        b.abort()
    assert ws.tree.store.branch_ids() == []
    assert reaper.drain(timeout=60)
    assert list((ws.tree.store.root / "trash").iterdir()) == []
    assert len(os.listdir("/proc/self/fd")) == fds_before
    if backend == "overlay":
        assert _helper_mounts(ws.tree.store.root) == []
