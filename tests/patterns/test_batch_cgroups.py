"""Limited sandbox batches: how keepers join their cgroups, and that none is left.

Real cgroups throughout; other sessions may have branch cgroups of their own under the
same parents, so only this process's (by owner tag) are counted.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from branching_core.patterns import BestOfN
from branching_core.sandbox import ResourceLimits, sandbox_available
from branching_core.sandbox.cgroups import (
    create_branch_cgroups,
    leftover_branch_cgroups,
    owner_tag,
)
from branching_core.workspace import Workspace
from tests.sandbox.conftest import cgroup_limits_unavailable

_NO_CGROUPS = cgroup_limits_unavailable()
needs_cgroups = pytest.mark.skipif(_NO_CGROUPS is not None,
                                   reason=f"cgroup limits unavailable: {_NO_CGROUPS}")
needs_sandbox = pytest.mark.skipif(not sandbox_available()[0], reason="no sandbox here")
LIMITS = ResourceLimits(memory="256M", cpu=1.0, pids=256)


def _ours() -> set[str]:
    """Names of this process's branch cgroups (other sessions may have theirs)."""
    tag = f"b{owner_tag()}-"
    return {p.name for p in leftover_branch_cgroups() if p.name.startswith(tag)}


@needs_cgroups
@needs_sandbox
def test_ctrl_c_while_a_limited_batch_starts_leaves_no_cgroup(copy_ws: Workspace) -> None:
    """Interrupted as soon as the first keeper has joined its cgroup (the start loop is
    then still running): every cgroup of the batch is gone when the interrupt reaches
    the caller."""
    before = _ours()
    main = threading.main_thread().ident
    assert main is not None
    stop = threading.Event()

    def interrupt_when_one_joined() -> None:
        while not stop.is_set():
            for path in leftover_branch_cgroups():
                if path.name.startswith(f"b{owner_tag()}-") and path.name not in before:
                    procs = path / "cgroup.procs"
                    if procs.exists() and procs.read_text().strip():
                        signal.pthread_kill(main, signal.SIGINT)
                        return
            time.sleep(0.001)

    def sleeper(path: Path) -> bool:
        time.sleep(30)
        return True

    watcher = threading.Thread(target=interrupt_when_one_joined, daemon=True)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            BestOfN([sleeper] * 8, resource_limits=LIMITS, timeout=60)(copy_ws)
    finally:
        stop.set()
        watcher.join()
    assert copy_ws.open_branches() == []
    assert _ours() == before


@needs_cgroups
@needs_sandbox
def test_the_keeper_joins_v1_cgroups_by_thread_and_the_whole_sandbox_is_inside(
        copy_ws: Workspace) -> None:
    """Moving a whole process (``cgroup.procs``) takes the kernel's global threadgroup
    lock, an RCU grace period per keeper that also stalls every fork meanwhile; the
    keeper has one thread, so it moves that thread (``tasks``) and lands in the same place."""
    cgroups = create_branch_cgroups(LIMITS)
    try:
        v1 = [p for p in cgroups.placements if p.version == 1]
        assert v1, "no cgroup v1 placement here"
        assert {str(p.path / "tasks") for p in v1} <= set(cgroups.procs_files)
        assert not any(f.endswith("cgroup.procs") and Path(f).parent in {p.path for p in v1}
                       for f in cgroups.procs_files)
    finally:
        cgroups.remove()

    def where(path: Path) -> tuple[bool, str]:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        names = {ctrl: line.rsplit("/", 1)[1] for line in lines
                 for ctrl in line.split(":")[1].split(",") if ctrl in ("memory", "cpu", "pids")}
        return True, " ".join(f"{ctrl}={names.get(ctrl)}" for ctrl in ("memory", "cpu", "pids"))

    outcome = BestOfN([where] * 3, resource_limits=LIMITS, timeout=60)(copy_ws)
    assert outcome.committed
    for result in outcome.all_results:
        names = {pair.split("=")[1] for pair in str(result.error_context).split()}
        assert len(names) == 1 and names.pop().startswith(f"b{owner_tag()}-"), \
            result.error_context
