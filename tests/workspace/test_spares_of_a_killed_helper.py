"""Spare views made by a mount helper that died are never handed out as mounted.

A batch of top-level sibling branches leaves, for the next batch, spare store
directories whose overlay view the helper has mounted already. Those mounts exist only
in that helper's private mount namespace: when it is SIGKILLed (an OOM kill, a kill of
its process group) they die with it, and the fresh helper the next batch starts has
none. Handed out as "mounted", such a spare gave a branch an empty directory for a view:
the branch did not show the workspace, and what was written there was not the branch's.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from branching_core import Workspace
from branching_core.workspace import mount_helper, reaper
from branching_core.workspace.mount_helper import MountHelper


def _mounts(helper: MountHelper, under: Path) -> list[str]:
    lines = Path(f"/proc/{helper.pid}/mounts").read_text().splitlines()
    return sorted(line.split()[1] for line in lines if line.split()[1].startswith(f"{under}/"))


def _await(check: Callable[[], bool], what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {within} s: {what}")
        time.sleep(0.005)


@pytest.mark.parametrize("backend", ["overlay"])
@pytest.mark.parametrize("batch", [2, 3])
def test_spares_of_a_killed_helper_are_never_handed_out_as_mounted(
    ws_dir: Path, backend: str, batch: int
) -> None:
    ws = Workspace(ws_dir, backend=backend)
    store = ws.tree.store.root
    kids = ws.branch_many([f"a{i}" for i in range(batch)], on_success=None, on_error=None)
    ws.abort_many(kids)
    old = mount_helper.helper_for(store)
    _await(lambda: len(_mounts(old, store / "spare")) >= batch, "the spares mounted ahead")
    os.kill(old.pid, signal.SIGKILL)
    _await(lambda: not old.alive, "the helper gone")
    fresh = ws.branch_many([f"b{i}" for i in range(batch)], on_success=None, on_error=None)
    for kid in fresh:
        assert (kid.path / "a.txt").read_text() == "a\n"  # the workspace, not an empty dir
        (kid.path / "z.txt").write_text(kid.name)
    fresh[0].commit()
    assert (ws_dir / "z.txt").read_text() == "b0"
    ws.abort_many([k for k in fresh if k.is_open])
    helper = mount_helper.helper_for(store)
    ws.close()
    assert _mounts(helper, store) == []
    assert reaper.drain(30)
    assert ws.tree.store.branch_ids() == []
