"""Real users are not root: the overlay and copy backends as uid 65534."""

from __future__ import annotations

import pytest

from tests.support.unprivileged import (
    assert_scenario_ok,
    chown_tree,
    make_world_readable_root,
    requires_unprivileged,
    run_as_nobody,
)

SCENARIO = r"""
import os, shutil, subprocess, sys
from pathlib import Path
from branching_core import Workspace, ConflictError

ws_dir = Path(sys.argv[1]); backend = sys.argv[2]
ws = Workspace(ws_dir, backend=backend)
assert ws.fstype == backend, ws.passed_over
# commit with a directory rename (EXDEV on overlay without redirect_dir) and a nested branch
with ws.branch("outer") as outer:
    subprocess.run(["mv", str(outer.path / "olddir"), str(outer.path / "newdir")], check=True)
    (outer.path / "a.txt").write_text("outer\n")
    with outer.branch("inner") as inner:
        (inner.path / "deep.txt").write_text("deep\n")
        assert subprocess.run(["cat", str(inner.path / "a.txt")], capture_output=True,
                              text=True, check=True).stdout == "outer\n"
assert (ws_dir / "newdir" / "x.txt").read_text() == "x\n" and not (ws_dir / "olddir").exists()
assert (ws_dir / "deep.txt").read_text() == "deep\n"
# first winner commits, the loser is aborted
x, y = ws.branch("x"), ws.branch("y")
(x.path / "a.txt").write_text("x\n"); (y.path / "a.txt").write_text("y\n")
x.commit()
try:
    y.commit()
    raise SystemExit("stale sibling committed")
except ConflictError as exc:
    assert exc.stale and y.state == "aborted"
# abort leaves nothing
z = ws.branch("z"); (z.path / "junk").write_text("j"); z.abort()
assert not (ws_dir / "junk").exists()
assert ws.tree.store.branch_ids() == [], ws.tree.store.branch_ids()
# a batch (made from spares on overlay, after the batch before it) and its discard
for round_ in range(2):
    kids = ws.branch_many([f"k{round_}-{i}" for i in range(4)], on_success=None)
    for kid in kids:
        (kid.path / "k.txt").write_text(kid.name)
        assert not (kid.path / ".pydantic-deep").exists()
    kids[1].commit()
    ws.abort_many([k for k in kids if k.is_open])
assert (ws_dir / "k.txt").read_text() == "k1-1"
assert ws.tree.store.branch_ids() == [], ws.tree.store.branch_ids()
ws.close()
spare = ws.tree.store.root / "spare"
assert not spare.exists() or list(spare.iterdir()) == [], list(spare.iterdir())
print("ok", ws.fstype)
"""


@requires_unprivileged
@pytest.mark.unprivileged
@pytest.mark.parametrize("backend", ["overlay", "copy"])
def test_workspace_semantics_as_an_unprivileged_user(backend: str) -> None:
    root = make_world_readable_root()
    ws_dir = root / "ws"
    (ws_dir / "olddir").mkdir(parents=True)
    (ws_dir / "olddir" / "x.txt").write_text("x\n")
    (ws_dir / "a.txt").write_text("a\n")
    chown_tree(ws_dir)
    proc = run_as_nobody(SCENARIO, root=root, args=[str(ws_dir), backend])
    assert assert_scenario_ok(proc).strip() == f"ok {backend}"
