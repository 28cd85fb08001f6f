"""A limited sandbox batch makes its cgroups before its first keeper joins one.

A v1 cgroup ``mkdir`` waits for the kernel's ``cgroup_mutex``, which every sandbox's keeper
holds while it joins its own cgroups; made one per candidate inside the start loop, the
caller queued behind the keepers it had just started. Real cgroups throughout.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from branching_core.patterns import BestOfN
from branching_core.sandbox import ResourceLimits, sandbox_available
from branching_core.sandbox.cgroups import (
    BranchCgroups,
    create_branch_cgroups,
    leftover_branch_cgroups,
    owner_tag,
    prepared_branch_cgroups,
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
def test_the_batch_is_made_up_front_and_handed_out_in_order() -> None:
    before = _ours()
    handed: list[BranchCgroups] = []
    try:
        with prepared_branch_cgroups(LIMITS, 3):
            made = _ours() - before
            assert len(made) == 3  # all of them, before anyone asked
            handed = [create_branch_cgroups(LIMITS) for _ in range(3)]
            assert {p.name for h in handed for p in h.paths} == made
            assert _ours() - before == made  # handed out, nothing new created
            other = create_branch_cgroups(ResourceLimits(pids=64))  # other limits: made anew
            handed.append(other)
            assert other.paths[0].name not in made
            extra = create_branch_cgroups(LIMITS)  # the batch is used up: made anew
            handed.append(extra)
            assert extra.paths[0].name not in made
        # What was handed out belongs to its taker until it removes it.
        assert {p.name for h in handed for p in h.paths} <= _ours()
    finally:
        for cgroups in handed:
            cgroups.remove()
    assert _ours() == before


@needs_cgroups
def test_cgroups_not_handed_out_are_removed_even_on_error() -> None:
    before = _ours()
    with pytest.raises(RuntimeError), prepared_branch_cgroups(LIMITS, 4):
        taken = create_branch_cgroups(LIMITS)
        assert len(_ours() - before) == 4
        raise RuntimeError("the start loop failed")
    assert _ours() - before == {p.name for p in taken.paths}
    taken.remove()
    assert _ours() == before


@needs_cgroups
def test_a_fork_of_the_preparing_thread_never_takes_its_parents_cgroups() -> None:
    """A sandboxed candidate is a fork of the thread holding the batch: a sandbox it
    starts itself must get cgroups of its own, not one its parent will hand out."""
    before = _ours()
    with prepared_branch_cgroups(LIMITS, 2):
        made = _ours() - before
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            status = 1
            try:
                own = create_branch_cgroups(LIMITS)
                os.write(w, " ".join(p.name for p in own.paths).encode())
                own.remove()
                status = 0
            finally:
                os._exit(status)
        os.close(w)
        with os.fdopen(r, "rb") as pipe:
            names = set(pipe.read().decode().split())
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        assert names and not names & made
        assert _ours() - before == made  # the parent's batch is untouched
    assert _ours() == before


@needs_cgroups
@needs_sandbox
def test_every_candidates_cgroup_exists_before_the_first_one_runs(copy_ws: Workspace) -> None:
    tag = f"b{owner_tag()}-"
    before = _ours()

    def look(path: Path) -> tuple[bool, str]:
        # Inside the sandbox: our own memory cgroup, and every batch cgroup there is.
        mine = next(line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text()
                    .splitlines() if line.split(":")[1] == "memory")
        here = Path("/sys/fs/cgroup/memory" + mine)
        limit = int((here / "memory.limit_in_bytes").read_text())
        # A listing of cgroupfs can miss an entry while its siblings' tasks move (seen
        # about once in twenty runs): the union of a few listings does not.
        siblings: set[str] = set()
        for _ in range(5):
            siblings.update(n for n in os.listdir(here.parent) if n.startswith(tag))
            time.sleep(0.002)
        return True, f"{here.name} {limit} {' '.join(sorted(siblings))}"

    outcome = BestOfN([look] * 12, resource_limits=LIMITS, timeout=60)(copy_ws)
    assert outcome.committed
    reports = [str(r.error_context).split() for r in outcome.all_results]
    own = {report[0] for report in reports}
    assert len(own) == 12  # one cgroup each...
    assert all(int(report[1]) == LIMITS.memory_bytes for report in reports)  # ...limited
    # The first candidate to run already saw all twelve (made before any keeper joined).
    first = min(outcome.all_results, key=lambda r: r.branch_index)
    assert set(str(first.error_context).split()[2:]) >= own
    assert _ours() == before  # and none is left


@needs_cgroups
@needs_sandbox
def test_ctrl_c_while_a_limited_batch_starts_leaves_no_cgroup(copy_ws: Workspace) -> None:
    """Interrupted as soon as the first keeper has joined its cgroup (the start loop is
    then still running): the cgroups made for candidates not started yet are removed
    too, before the interrupt reaches the caller."""
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
