"""Issue 24.15: a normal user is one identity everywhere. A command in a workspace branch
(the view helper's namespaces: what ``forkdeck run`` and the branches use) appeared as uid
0, while the TUI's ``!cmd`` in a plain directory ran as the user: now both see the user's
own uid and gid, and the user's files as theirs (the mapping ``unshare
--map-current-user`` makes). Run for real as uid 65534 (setpriv, system Python)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.unprivileged import (
    NOBODY,
    assert_scenario_ok,
    chown_tree,
    make_world_readable_root,
    requires_unprivileged,
    run_as_nobody,
)

pytestmark = [requires_unprivileged]

SCENARIO = r'''
import json, sys
from pathlib import Path
from branching_core.sandbox import run_command
from branching_core.workspace import Workspace

root = Path(sys.argv[1])
probe = "id -u; id -g; stat -c %u:%g README.txt"
out = {"plain": run_command(probe, root).stdout.split()}
ws = Workspace(root)
out["fstype"] = ws.fstype
with ws.branch("probe") as branch:
    result = run_command(probe + "; touch made.txt; stat -c %u made.txt", branch.path)
    out["branch"] = result.stdout.split()
    out["exit"] = result.exit_code
    branch.abort()
print(json.dumps(out))
'''


@pytest.fixture
def nobody_root() -> Iterator[Path]:
    root = make_world_readable_root()
    (root / "ws").mkdir()
    (root / "ws" / "README.txt").write_text("hello\n")
    chown_tree(root / "ws")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_a_branch_command_runs_as_the_user_as_a_plain_one_does(nobody_root: Path) -> None:
    proc = run_as_nobody(SCENARIO, root=nobody_root, args=[str(nobody_root / "ws")])
    out = json.loads(assert_scenario_ok(proc).strip().splitlines()[-1])
    me = [str(NOBODY), str(NOBODY), f"{NOBODY}:{NOBODY}"]
    assert out["plain"] == me
    assert out["exit"] == 0, out
    assert out["branch"] == [*me, str(NOBODY)], out  # was ["0", "0", "0:0", "0"]
