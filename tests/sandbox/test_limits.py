"""Resource limits enforced by real cgroups: OOM, fork bomb, CPU cap; plus parsing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from branching_core.errors import ProcessBranchError
from branching_core.sandbox import (
    BranchContext,
    ResourceLimits,
    leftover_branch_cgroups,
    parse_memory,
    run_command,
)
from branching_core.sandbox.cgroups import create_branch_cgroups

from .conftest import cgroup_limits_unavailable

# Every test runs against the native executor and the Python path (conftest.executor).
pytestmark = pytest.mark.usefixtures("executor")

_NO_CGROUPS = cgroup_limits_unavailable()
requires_cgroups = pytest.mark.skipif(_NO_CGROUPS is not None, reason=_NO_CGROUPS or "")


def test_memory_parsing() -> None:
    assert parse_memory("512M") == 512 << 20
    assert parse_memory("1G") == 1 << 30
    assert parse_memory("64MiB") == 64 << 20
    assert parse_memory(4096) == 4096
    assert ResourceLimits(memory="1.5G").memory == int(1.5 * (1 << 30))
    for bad in ("lots", "-1M", 0):
        with pytest.raises(ValueError):
            parse_memory(bad)
    with pytest.raises(ValueError):
        ResourceLimits(cpu=0)
    with pytest.raises(ValueError):
        ResourceLimits(pids=0)
    assert not ResourceLimits().any
    assert ResourceLimits(pids=3).controllers() == ["pids"]


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"cpu": float("inf")}, "finite"),
    ({"cpu": float("nan")}, "finite"),
    ({"cpu": float("-inf")}, "finite"),
    ({"cpu": 1e308}, "between"),
    ({"cpu": 0.001}, "between"),
    ({"cpu": "lots"}, "number of CPUs"),
    ({"cpu": True}, "number of CPUs"),
    ({"pids": 2.5}, "whole number"),
    ({"pids": float("inf")}, "whole number"),
    ({"pids": 10**12}, "between"),
    ({"pids": True}, "whole number"),
    ({"memory": 1e9}, "size like"),
    ({"memory": float("inf")}, "size like"),
    ({"memory": 10**30}, "1 PiB"),
    ({"memory": "99999999T"}, "1 PiB"),
])
def test_insane_limits_are_refused_with_a_clear_error(kwargs: dict[str, object],
                                                     words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ResourceLimits(**kwargs)  # type: ignore[arg-type]


@requires_cgroups
def test_a_failure_while_configuring_leaves_no_cgroup() -> None:
    """Whatever goes wrong between creating a cgroup and applying it, it is removed."""
    before = set(leftover_branch_cgroups())
    limits = ResourceLimits(cpu=0.5)
    object.__setattr__(limits, "cpu", float("inf"))  # what an unvalidated value once did
    with pytest.raises(OverflowError):
        create_branch_cgroups(limits)
    assert set(leftover_branch_cgroups()) - before == set()


@requires_cgroups
def test_memory_hog_is_oom_killed_and_reported(ws: Path) -> None:
    def hog(path: Path) -> int:
        block = b"\x01" * (300 * 1024 * 1024)  # written, so really charged
        return len(block)

    with (
        BranchContext(hog, ws, limits=ResourceLimits(memory="64M")) as ctx,
        pytest.raises(ProcessBranchError) as info,
    ):
        ctx.wait(timeout=60)
    assert info.value.oom_killed
    assert info.value.signal == 9
    assert "out of memory" in str(info.value)


@requires_cgroups
def test_memory_limit_allows_small_work(ws: Path) -> None:
    with BranchContext(lambda p: len(b"x" * (8 << 20)), ws,
                       limits=ResourceLimits(memory="128M")) as ctx:
        assert ctx.wait(timeout=30) == 8 << 20


@requires_cgroups
def test_fork_bomb_is_contained(ws: Path) -> None:
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 2; echo survived"
    result = run_command(["bash", "-c", bomb], ws, limits=ResourceLimits(pids=64), timeout=20)
    assert "fork: retry" in result.stderr or "Resource temporarily unavailable" in result.stderr
    # The host is fine: we can still fork, and the branch's tasks are all gone.
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0


def _busy_share(path: Path) -> float:
    """CPU seconds per wall second of a busy loop running for 1.5 s."""
    start_wall, start_cpu = time.monotonic(), time.process_time()
    while time.monotonic() - start_wall < 1.5:
        pass
    return (time.process_time() - start_cpu) / (time.monotonic() - start_wall)


@requires_cgroups
def test_cpu_cap_halves_a_busy_loop(ws: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    capped = BranchContext(_busy_share, ws, limits=ResourceLimits(cpu=0.5))
    free = BranchContext(_busy_share, other)
    with capped, free:
        capped_share, free_share = capped.wait(timeout=60), free.wait(timeout=60)
    # The cap holds whatever else the machine is doing: a 50% quota never yields much
    # more than half a CPU. Halving is only measurable when the free loop got most of one.
    assert 0.2 < capped_share < 0.6, (capped_share, free_share)
    if free_share > 0.8:
        assert capped_share < 0.75 * free_share, (capped_share, free_share)
