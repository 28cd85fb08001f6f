"""The public surface other layers use instead of a branch's privates (issue 15):
``Branch.write_layer``, ``Branch.hold()`` and the shared ``BranchTree``."""

from __future__ import annotations

import threading
from pathlib import Path

from branching_core import Workspace


def test_write_layer_holds_what_the_branch_wrote(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    with ws.branch("w", on_success=None) as b:
        (b.path / "mine.txt").write_text("mine\n")
        layer = b.write_layer
        assert (layer / "mine.txt").read_text() == "mine\n"
        if backend == "overlay":
            # the upper directory: the branch's own writes, none of the parent's files
            assert layer != b.path and not (layer / "a.txt").exists()
        else:
            assert layer == b.path  # copy and reflink write in place
        b.abort()


def test_hold_keeps_commit_waiting_and_reports_closed(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    b = ws.branch("h", on_success=None)
    (b.path / "new.txt").write_text("new\n")
    started = threading.Event()
    committer = threading.Thread(target=lambda: (started.set(), b.commit()))
    with b.hold() as is_open:
        assert is_open
        committer.start()
        started.wait()
        committer.join(timeout=0.5)
        # the commit waits on the held lock: nothing published yet
        assert committer.is_alive() and b.is_open and not (ws_dir / "new.txt").exists()
    committer.join()
    assert b.state == "committed" and (ws_dir / "new.txt").read_text() == "new\n"
    with b.hold() as is_open:
        assert not is_open


def test_every_node_shares_one_tree(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    with ws.branch("outer", on_success=None) as outer, outer.branch("inner") as inner:
        assert outer.tree is ws.tree and inner.tree is ws.tree
        assert ws.tree.get(inner.id) is inner and ws.tree.open_ids() == {outer.id, inner.id}
        assert ws.tree.backend.name == ws.fstype
        inner.abort()
        outer.abort()
    assert ws.tree.open_branches() == []
