"""Branch cgroups of a killed caller are swept at the next start (issue 12, item 14),
and only those: other sessions run limited sandboxes on this machine at the same time."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from branching_core.sandbox.cgroups import (
    PARENT_NAME,
    CgroupMounts,
    owner_tag,
    sweep_dead_branch_cgroups,
)
from tests.support.killed_child import REPO, run_until_ready_then_kill

from .conftest import cgroup_limits_unavailable, wait_until_gone

# Every test runs against the native executor and the Python path (conftest.executor).
pytestmark = pytest.mark.usefixtures("executor")

_NO_CGROUPS = cgroup_limits_unavailable()
requires_cgroups = pytest.mark.skipif(_NO_CGROUPS is not None, reason=_NO_CGROUPS or "")

MAKE_AND_HANG = r'''
import sys, time
from branching_core.sandbox import SandboxedCommand, ResourceLimits
branch = SandboxedCommand(f"sleep {sys.argv[2]}", sys.argv[1], limits=ResourceLimits(pids=64))
print("READY", ",".join(str(p) for p in branch._b.cgroups.paths), flush=True)
time.sleep(600)
'''

START_AGAIN = r'''
import sys
from branching_core.sandbox import ResourceLimits, run_command
assert run_command("true", sys.argv[1], limits=ResourceLimits(pids=64)).exit_code == 0
'''


@requires_cgroups
def test_a_killed_callers_cgroups_are_swept_at_next_start(ws: Path, no_leftover: str) -> None:
    paths = run_until_ready_then_kill(MAKE_AND_HANG, str(ws), no_leftover).split(",")
    assert wait_until_gone(no_leftover) == [], "the killed caller's sandbox outlived it"
    assert paths and all(Path(p).is_dir() for p in paths), "expected the leak to reproduce"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", START_AGAIN, str(ws)], env=env, check=True,
                   timeout=60)
    assert [p for p in paths if Path(p).exists()] == []


def _dead_pid_and_start() -> tuple[int, int]:
    proc = subprocess.Popen(["sleep", "30"])
    with open(f"/proc/{proc.pid}/stat", "rb") as fh:
        data = fh.read()
    start = int(data[data.rindex(b")") + 2:].split()[19])
    proc.kill()
    proc.wait()
    return proc.pid, start


def test_sweep_takes_only_provably_dead_owners() -> None:
    """On every hierarchy this process can write (v1 controllers and v2)."""
    mounts = CgroupMounts.discover()
    roots = [*mounts.v1_dirs.values(), *([mounts.v2_dir] if mounts.v2_dir else [])]
    ns = os.stat("/proc/self/ns/pid").st_ino
    dead_pid, dead_start = _dead_pid_and_start()
    live_pid = os.getppid()
    with open(f"/proc/{live_pid}/stat", "rb") as fh:
        data = fh.read()
    live_start = int(data[data.rindex(b")") + 2:].split()[19])
    tag = secrets.token_hex(3)
    names = {
        "dead": f"b{ns}.{dead_pid}.{dead_start}-0-{tag}",
        "reused pid": f"b{ns}.{live_pid}.{live_start + 1}-0-{tag}",
        "live": f"b{owner_tag()}-0-{tag}",
        "live parent": f"b{ns}.{live_pid}.{live_start}-0-{tag}",
        "other pid namespace": f"b{ns + 1}.{dead_pid}.{dead_start}-0-{tag}",
    }
    made: list[Path] = []
    try:
        for root in dict.fromkeys(roots):
            try:
                (root / PARENT_NAME).mkdir(exist_ok=True)
                for name in names.values():
                    (root / PARENT_NAME / name).mkdir()
                    made.append(root / PARENT_NAME / name)
            except OSError:
                continue  # a hierarchy this user cannot write
        if not made:
            pytest.skip("no cgroup hierarchy is writable here")
        swept = set(sweep_dead_branch_cgroups(mounts))
        for path in made:
            expect_gone = path.name in (names["dead"], names["reused pid"])
            assert (path in swept) == expect_gone, path
            assert path.exists() != expect_gone, path
    finally:
        for path in made:
            if path.exists():
                path.rmdir()
