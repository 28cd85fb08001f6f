"""The sandbox as uid 65534: full isolation without limits, and limits refused loudly."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.unprivileged import (
    assert_scenario_ok,
    chown_tree,
    make_world_readable_root,
    requires_unprivileged,
    run_as_nobody,
)

# Every test runs against the native executor and the Python path (conftest.executor).
pytestmark = [pytest.mark.unprivileged, requires_unprivileged,
              pytest.mark.usefixtures("executor")]

SCENARIO = r'''
import json, os, sys
from pathlib import Path
from branching_core.errors import ResourceLimitError
from branching_core.sandbox import BranchContext, ResourceLimits, run_command, sandbox_available

ws = Path(sys.argv[1])
out = {"available": sandbox_available(), "uid": os.getuid()}

def target(path):
    (path / "made.txt").write_text("by nobody")
    try:
        open("/var/tmp/forkdeck-nobody-escape", "w")
        escaped = True
    except OSError:
        escaped = False
    return {"cwd": os.getcwd(), "escaped": escaped, "pid": os.getpid(),
            "own_fds": len(os.listdir("/proc/self/fd")) > 2}

with BranchContext(target, ws) as ctx:
    out["callable"] = ctx.wait(timeout=30)
r = run_command("id -u; cat /proc/self/uid_map", ws)
out["command"] = [r.exit_code, r.stdout]
try:
    BranchContext(target, ws, limits=ResourceLimits(memory="64M"))
    out["limits"] = "ran without limits!"
except ResourceLimitError as exc:
    out["limits"] = str(exc)
print(json.dumps(out))
'''


@pytest.fixture
def nobody_root() -> Iterator[Path]:
    root = make_world_readable_root()
    (root / "ws").mkdir()
    chown_tree(root / "ws")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_sandbox_works_for_nobody_and_refuses_limits(nobody_root: Path) -> None:
    ws = nobody_root / "ws"
    proc = run_as_nobody(SCENARIO, root=nobody_root, args=[str(ws)], timeout=120)
    out = json.loads(assert_scenario_ok(proc).strip().splitlines()[-1])
    assert out["uid"] == 65534
    assert out["available"][0] is True, out["available"]
    assert out["callable"] == {"cwd": str(ws), "escaped": False, "pid": 1,
                              "own_fds": True}
    assert (ws / "made.txt").read_text() == "by nobody"
    assert out["command"][0] == 0
    assert out["command"][1].splitlines()[0] == "65534"
    assert "65534" in out["command"][1].splitlines()[1]  # identity map inside its own userns
    assert "denied" in out["limits"] and "not delegated" in out["limits"], out["limits"]
    assert not Path("/var/tmp/forkdeck-nobody-escape").exists()
