"""One conflict rule for every landing (issue 23): a branch's commit (a pick, a pattern's
winner), a stale fork winner's pre-check (``apply.changed_since``), a stale sub-agent's
landing and a Ray node's delta all decide "changed in the parent since the change began"
with ``changes.find_conflicts``, so the same third-party change is the same conflict in
each, on every backend.

The third party rewrites ``a.txt`` with the bytes it already held (a change all the same:
nobody can tell it was not a different version a moment ago) and deletes ``sub/b.txt``,
which the change modified (landing it would resurrect a file someone deleted).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from branching_core import ConflictError, Workspace
from branching_core.cluster.delta import Delta
from branching_core.cluster.delta import apply as apply_delta
from branching_core.cluster.snapshot import take
from branching_core.live.subagents.merge import land as land_subagent
from branching_core.workspace.apply import change_ops, changed_since
from branching_core.workspace.changes import find_conflicts
from tests.workspace.treeutil import snapshot

TICK = 0.02  # ctimes come from the kernel's coarse clock (one tick, 4 ms at HZ=250)
EXPECTED = ["a.txt", "sub/b.txt"]


def _edit(root: Path) -> None:
    (root / "a.txt").write_text("the change's a\n")
    (root / "sub" / "b.txt").write_text("the change's b\n")


def _third_party(ws_dir: Path) -> None:
    time.sleep(TICK)
    (ws_dir / "a.txt").write_bytes((ws_dir / "a.txt").read_bytes())
    (ws_dir / "sub" / "b.txt").unlink()


def test_a_commit_refuses_what_the_parent_changed(ws_dir: Path) -> None:
    ws = Workspace(ws_dir)
    branch = ws.branch("x", on_success=None, on_error=None)
    _edit(branch.path)
    _third_party(ws_dir)
    before = snapshot(ws_dir)
    with pytest.raises(ConflictError) as info:
        branch.commit()
    assert sorted(info.value.paths) == EXPECTED
    assert snapshot(ws_dir) == before
    ws.close()


def test_a_stale_winners_precheck_is_the_same_rule(ws_dir: Path) -> None:
    ws = Workspace(ws_dir)
    branch = ws.branch("x", on_success=None, on_error=None)
    _edit(branch.path)
    _third_party(ws_dir)
    changes = branch.changes()
    found = changed_since(changes, ws_dir, branch.created_ns)
    assert found == EXPECTED
    assert found == find_conflicts(change_ops(changes), ws_dir, branch.created_ns)
    branch.abort()
    ws.close()


async def test_a_stale_sub_agent_lands_nothing_and_resurrects_nothing(ws_dir: Path) -> None:
    ws = Workspace(ws_dir)
    mine = ws.branch("mine", on_success=None, on_error=None)
    sibling = ws.branch("sibling", on_success=None, on_error=None)
    (sibling.path / "other.txt").write_text("the sibling's\n")
    sibling.commit()  # mine is stale now: it lands path by path, under the same rule
    assert mine.is_stale
    _edit(mine.path)
    _third_party(ws_dir)
    before = snapshot(ws_dir)
    landing = await land_subagent(mine)
    assert not landing.committed and landing.conflicts == EXPECTED
    assert snapshot(ws_dir) == before
    assert not (ws_dir / "sub" / "b.txt").exists()
    ws.close()


async def test_a_stale_sub_agent_deleting_what_the_parent_deleted_is_no_conflict(
    ws_dir: Path,
) -> None:
    """As for a commit: both sides removed the file, nothing to keep apart (the sub-agent
    landing had a rule of its own that called this a conflict)."""
    ws = Workspace(ws_dir)
    mine = ws.branch("mine", on_success=None, on_error=None)
    sibling = ws.branch("sibling", on_success=None, on_error=None)
    (sibling.path / "other.txt").write_text("the sibling's\n")
    sibling.commit()
    (mine.path / "sub" / "b.txt").unlink()
    (mine.path / "new.txt").write_text("mine\n")
    time.sleep(TICK)
    (ws_dir / "sub" / "b.txt").unlink()
    landing = await land_subagent(mine)
    assert landing.committed and landing.conflicts == [], landing
    assert (ws_dir / "new.txt").read_text() == "mine\n"
    ws.close()


def test_a_ray_delta_is_refused_by_the_same_rule(ws_dir: Path) -> None:
    """The delta's conflicts were decided against the snapshot's manifest (content): a
    rewrite with the same bytes slipped through. Now the snapshot's start time is the
    landing's ``since`` and the manifest says what existed then."""
    ws = Workspace(ws_dir)
    snap = take(ws_dir)
    delta = Delta(files={"a.txt": (0o644, b"node a\n"), "sub/b.txt": (0o644, b"node b\n")})
    _third_party(ws_dir)
    before = snapshot(ws_dir)
    with pytest.raises(ConflictError) as info:
        apply_delta(ws, delta, snap, name="node")
    assert sorted(info.value.paths) == EXPECTED
    assert snapshot(ws_dir) == before
    ws.close()


def test_a_ray_delta_beside_an_unrelated_parent_change_lands(ws_dir: Path) -> None:
    ws = Workspace(ws_dir)
    snap = take(ws_dir)
    time.sleep(TICK)
    (ws_dir / "unrelated.txt").write_text("someone else's\n")
    apply_delta(ws, Delta(files={"a.txt": (0o644, b"node a\n")}), snap, name="node")
    assert (ws_dir / "a.txt").read_text() == "node a\n"
    assert (ws_dir / "unrelated.txt").read_text() == "someone else's\n"
    ws.close()
