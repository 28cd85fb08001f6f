"""The forked candidate child (``timeout=``): what it must and must not inherit."""

from __future__ import annotations

import atexit
import gc
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from branching_core.patterns import BestOfN
from branching_core.patterns._proc import CandidateTimeout, ChildProcessHandle
from branching_core.sandbox import native
from branching_core.workspace import Workspace, reaper


def test_child_does_not_run_the_callers_atexit_handlers(copy_ws: Workspace,
                                                        tmp_path: Path) -> None:
    marker = tmp_path / "atexit-ran"

    def handler() -> None:
        marker.write_text(str(os.getpid()))

    atexit.register(handler)
    try:
        outcome = BestOfN([lambda p: True, lambda p: True], timeout=30)(copy_ws)
    finally:
        atexit.unregister(handler)
    assert outcome.committed
    assert not marker.exists(), "a forked candidate ran the caller's atexit handler"


def test_child_freezes_the_inherited_heap_and_the_caller_stays_unfrozen(
        copy_ws: Workspace) -> None:
    before = gc.get_freeze_count()
    outcome = BestOfN([lambda p: (True, float(gc.get_freeze_count()))], timeout=30)(copy_ws)
    assert outcome.winner is not None
    # The child's collections skip everything it inherited from the caller...
    assert outcome.winner.score is not None and outcome.winner.score > before
    # ...and the caller's own collector is left exactly as it was.
    assert gc.get_freeze_count() == before


def test_no_helper_thread_per_child_and_a_large_result_still_arrives(tmp_path: Path) -> None:
    """The waiting thread drains the pipe itself: a result far larger than the pipe
    buffer comes back whole, and starting a child adds no thread to the caller."""
    threads = threading.active_count()
    handle = ChildProcessHandle(lambda p: b"x" * (4 << 20), tmp_path)
    assert threading.active_count() == threads
    assert handle.run(30) == b"x" * (4 << 20)


def test_timeout_kills_the_child_and_its_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"

    def sleeper(path: Path) -> None:
        pid = os.fork()
        if pid == 0:
            os.execvp("sleep", ["sleep", "30"])
        pidfile.write_text(str(pid))
        os.waitpid(pid, 0)

    handle = ChildProcessHandle(sleeper, tmp_path)
    try:
        handle.run(0.5)
    except CandidateTimeout:
        pass
    else:
        raise AssertionError("the 30 s candidate was not timed out")
    grandchild = int(pidfile.read_text())
    # The grandchild was our child's child: once killed, init reaps it.
    for _ in range(200):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{grandchild}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    else:
        raise AssertionError("the candidate's helper process outlived its timeout")


def test_a_batch_is_forked_back_to_back_by_one_thread(copy_ws: Workspace) -> None:
    """Sixteen worker threads each forking between their own Python work made the
    caller's memory copy-on-write again and again; the batch is now forked in one
    loop by one starter thread (a fork's only thread is the one that forked)."""
    seen: list[str] = []

    def record(result: object) -> None:
        seen.append(str(getattr(result, "status", "")))

    def name(path: Path) -> tuple[bool, str]:
        return True, threading.current_thread().name

    outcome = BestOfN([name] * 4, timeout=30, progress=record)(copy_ws)
    assert outcome.committed
    forkers = {r.error_context for r in outcome.all_results}
    assert len(forkers) == 1 and forkers.pop() != threading.current_thread().name
    assert seen.count("running") == 4  # progress still reports each start


def _children_of_me() -> list[int]:
    """Our child processes, zombies included (an unreaped child is left behind too)."""
    me, kids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                kids.append(int(entry))
    return kids


def test_ctrl_c_while_a_batch_starts_leaves_nothing_behind(copy_ws: Workspace) -> None:
    """The first child interrupts the caller at once, while it is still forking the
    rest: every child that started is killed and reaped, every branch aborted."""
    native.drain_pool()  # idle pre-started executors of earlier tests are no candidates
    before = set(_children_of_me())

    def interrupt(path: Path) -> bool:
        os.kill(os.getppid(), signal.SIGINT)
        time.sleep(30)
        return True

    def sleeper(path: Path) -> bool:
        time.sleep(30)
        return True

    with pytest.raises(KeyboardInterrupt):
        BestOfN([interrupt] + [sleeper] * 15, timeout=60)(copy_ws)
    assert copy_ws.open_branches() == []
    # The aborted branches' directories are removed in the background by an `rm` child of
    # ours (workspace/reaper.py); let it finish so only the candidates' processes count.
    assert reaper.drain(timeout=60)
    assert set(_children_of_me()) - before == set()
