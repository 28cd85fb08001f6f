"""One fork per sandbox (issue 29): a privileged caller's init is forked straight into its
new pid namespace by one long-lived thread, with no keeper in between; and an init that
ended the rest of its branch says so (an end record), so its caller need not wait for
its exit. Both shapes keep every guarantee: each test here runs with the init forked
straight in and with the keeper (``FORKDECK_ONE_FORK=0``), the shape unprivileged
callers always take.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.errors import ProcessBranchError
from branching_core.sandbox import BranchContext, _forker
from tests.support.procs import reads_eof_now

from .conftest import processes_with, sleeping_with, wait_until_gone

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["one-fork", "keeper"])
def shape(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test with the init forked straight into its namespace, then with a keeper.

    The one-fork case fails if a sandbox took the keeper although this caller can make
    pid namespaces (root), and is skipped where it cannot (the keeper is then the shape).
    """
    if request.param == "keeper":
        monkeypatch.setenv(_forker.ENV_ONE_FORK, "0")
        yield "keeper"
        return
    monkeypatch.delenv(_forker.ENV_ONE_FORK, raising=False)
    if os.geteuid() != 0:
        pytest.skip("only a caller with CAP_SYS_ADMIN forks its sandbox's init itself")
    before = _forker.forker().forks
    yield "one-fork"
    assert _forker.forker().unusable is None, _forker.forker().unusable
    assert _forker.forker().forks > before, "no sandbox was forked the one-fork way"


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
        return dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)


def test_the_init_is_our_child_and_pid_1_of_its_namespace(ws: Path, shape: str) -> None:
    """One fork: the process the caller holds is the sandbox's pid 1 itself. With the
    keeper, it is the keeper (outside the namespace), whose child is that pid 1."""

    def target(path: Path) -> int:
        return os.getpid()

    with BranchContext(lambda p: time.sleep(30), ws) as ctx:
        status = _status(ctx.pid)
        assert int(status["PPid"]) == os.getpid()
        ns_pids = status["NSpid"].split()
        if shape == "one-fork":
            assert ns_pids[-1] == "1" and len(ns_pids) == 2, status["NSpid"]
        else:
            assert len(ns_pids) == 1, status["NSpid"]  # the keeper stays outside
        ctx.abort()
    with BranchContext(target, ws) as ctx:
        assert ctx.wait(timeout=30) == 1  # the target runs as the namespace's init


def test_a_sandbox_outlives_the_thread_that_started_it(ws: Path, shape: str) -> None:
    """The parent-death signal follows the thread that forked: a sandbox started from a
    worker thread that then ends must go on running (the forking thread lives on)."""
    started: list[BranchContext] = []

    def target(path: Path) -> str:
        time.sleep(0.5)
        (path / "done").write_text("yes")
        return "finished"

    worker = threading.Thread(target=lambda: started.append(BranchContext(target, ws)))
    worker.start()
    worker.join()
    (ctx,) = started
    with ctx:
        assert ctx.wait(timeout=30) == "finished"
    assert (ws / "done").read_text() == "yes"


def test_abort_kills_the_whole_tree(ws: Path, shape: str, no_leftover: str) -> None:
    marker = no_leftover

    def target(path: Path) -> None:
        subprocess.Popen(["setsid", "sleep", marker], start_new_session=True)
        subprocess.Popen(["sh", "-c", f"nohup sleep {marker} >/dev/null 2>&1 &"])
        time.sleep(600)

    with BranchContext(target, ws) as ctx:
        deadline = time.monotonic() + 20
        while len(sleeping_with(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(sleeping_with(marker)) == 2
        ctx.abort()
        with pytest.raises(ProcessBranchError, match="aborted"):
            ctx.wait()
    assert wait_until_gone(marker) == []


PARENT = """\
import subprocess, sys, threading, time
from branching_core.sandbox import BranchContext, _forker
def t(p):
    subprocess.Popen(['setsid', 'sleep', '{marker}'], start_new_session=True)
    time.sleep(600)
# started from a thread that has ended by the time the caller is killed
starter = threading.Thread(target=lambda: globals().setdefault('ctx', BranchContext(t, {ws!r})))
starter.start()
starter.join()
print('started', _forker.forker().forks, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("one_fork", ["1", "0"])
def test_sigkill_of_the_caller_kills_the_sandbox(ws: Path, one_fork: str,
                                                 no_leftover: str) -> None:
    """The caller dies by SIGKILL, with nothing of its own code left to run: the kernel
    ends the init (the parent-death signal, or the keeper seeing the lifeline's EOF)
    and with it the whole pid namespace, setsid'd grandchildren included."""
    marker = no_leftover
    env = {**os.environ, "PYTHONPATH": str(REPO), _forker.ENV_ONE_FORK: one_fork}
    proc = subprocess.Popen([sys.executable, "-c", PARENT.format(marker=marker, ws=str(ws))],
                            stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout is not None
        started, forks = proc.stdout.readline().split()
        assert started == "started"
        assert int(forks) == (1 if one_fork == "1" and os.geteuid() == 0 else 0)
        deadline = time.monotonic() + 20
        while not processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert processes_with(marker)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert wait_until_gone(marker) == []


def test_the_end_record_comes_after_everything_else_has_ended(
    ws: Path, shape: str, no_leftover: str
) -> None:
    """A target that returns while double-forked helpers still run: the init ends them
    before its end record, so once ``wait`` returns none of them is left."""
    marker = no_leftover

    def target(path: Path) -> str:
        subprocess.Popen(["setsid", "-f", "sleep", marker]).wait()
        subprocess.Popen(["sh", "-c", f"nohup sleep {marker} >/dev/null 2>&1 &"]).wait()
        return "done"

    with BranchContext(target, ws) as ctx:
        assert ctx.wait(timeout=30) == "done"
        assert ctx._b._early, "the caller waited for the init's exit"  # (white-box)
        assert processes_with(marker) == []
    assert wait_until_gone(marker) == []


def test_no_fd_of_the_caller_is_held_once_wait_returns(ws: Path, shape: str) -> None:
    """``close_fds=False`` (the default) hands the target every fd of the caller: once
    ``wait`` returns, no process of the branch holds one any more, the keeper included.
    The early end does not wait for the keeper's exit, and a keeper that closed only the
    target's fds kept the others until then: a pipe the caller had made beforehand did
    not read as closed (about one return in four as root with the keeper, under load)."""
    for attempt in range(40):
        r, w = os.pipe()
        try:
            with BranchContext(lambda path: 1, ws) as ctx:
                assert ctx.wait(timeout=30) == 1
            os.close(w)
            assert reads_eof_now(r), (
                f"attempt {attempt}: a copy of the caller's pipe was still open"
            )
        finally:
            os.close(r)


def test_a_target_that_left_threads_running_is_waited_for(ws: Path, shape: str) -> None:
    """No end record while other threads of the init run (they could still write to
    the branch): the caller waits for the init's exit, which ends them."""

    def target(path: Path) -> int:
        threading.Thread(target=time.sleep, args=(0.2,), daemon=True).start()
        return 7

    with BranchContext(target, ws) as ctx:
        assert ctx.wait(timeout=30) == 7
        assert not ctx._b._early


@pytest.mark.parametrize(("code", "seen"), [(0, 0), (3, 3), (300, 300 & 0xFF)])
def test_exit_codes_are_what_a_wait_would_see(ws: Path, shape: str, code: int,
                                              seen: int) -> None:
    """The end record carries the code the init exits with, as ``waitpid`` reports it."""

    def target(path: Path) -> None:
        raise SystemExit(code)

    with BranchContext(target, ws) as ctx:
        if code == 0:
            assert ctx.wait(timeout=30) is None
        else:
            with pytest.raises(ProcessBranchError):
                ctx.wait(timeout=30)
        assert ctx.exit_code == seen
        assert ctx._b._early
