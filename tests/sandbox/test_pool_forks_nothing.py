"""The executor pool never forks or spawns from a thread of its own.

Any fork or spawn copies every fd of the process, close-on-exec ones included, into the
child until its ``exec``. The pool's thread used to ``posix_spawn`` the next executor as a
command ended, so a fd the caller had passed to that command and closed on its return
could still be open in that child for a moment: the caller's pipe did not read as closed
(``test_nothing_of_the_command_runs_once_it_has_returned`` failed in 1-15 % of its runs
as a normal user). Executors now come from a spawner process that holds none of the
caller's fds; only a caller's own thread starts that spawner, while it waits for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from branching_core.sandbox import native_pool, run_command
from tests.sandbox.conftest import native_binary_or_skip
from tests.support.killed_child import REPO
from tests.support.procs import alive, reads_eof_now


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(native_pool.ENV_POOL, raising=False)
    return native_binary_or_skip(monkeypatch)


# Every fork, spawn and exec of this process, with the thread that made it (audit hooks
# cannot be removed: in a child of its own).
SPAWNS = r"""
import json, sys, threading, time
from branching_core.sandbox import native_pool, run_command
seen = []
def hook(event, args):
    if event in ("os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "subprocess.Popen"):
        seen.append((event, threading.current_thread().name))
sys.addaudithook(hook)
def filled():
    deadline = time.monotonic() + 30
    while len(native_pool.pool().idle_pids()) < native_pool.Pool.SIZE:
        assert time.monotonic() < deadline, "the pool never filled"
        time.sleep(0.01)
for _ in range(4):
    assert run_command(["true"], sys.argv[1]).exit_code == 0
    filled()
print(json.dumps({"seen": seen, "spawned": native_pool.pool().spawned}))
"""


def test_the_pools_thread_forks_and_spawns_nothing(ws: Path, built: Path) -> None:
    out = subprocess.run([sys.executable, "-c", SPAWNS, str(ws)], cwd=REPO, check=True,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    report = json.loads(out.stdout)
    assert report["spawned"] >= 4  # the pool was refilled after every command
    assert {thread for _, thread in report["seen"]} == {"MainThread"}, report["seen"]


def test_a_passed_fd_reads_closed_at_every_return_while_the_pool_refills(
    ws: Path, built: Path
) -> None:
    """The end-to-end form: each command's end wakes the refill; the passed pipe must
    read as closed the moment ``run_command`` returns, every time."""
    run_command(["true"], ws)  # the pool and its spawner exist from here on
    for attempt in range(30):
        r, w = os.pipe()
        try:
            result = run_command(["true"], ws, extra_fds={5: w})
            os.close(w)
            assert result.exit_code == 0
            assert reads_eof_now(r), f"attempt {attempt}: the passed fd was still open somewhere"
        finally:
            os.close(r)


OWNER = r"""
import sys, time
from branching_core.sandbox import native_pool, run_command
run_command(["true"], sys.argv[1])
while len(native_pool.pool().idle_pids()) < native_pool.Pool.SIZE:
    time.sleep(0.01)
spawner = native_pool.pool().spawner
assert spawner is not None
print(spawner.pid, *native_pool.pool().idle_pids(), flush=True)
time.sleep(600)
"""


def test_a_killed_owner_leaves_no_spawner_and_no_executor(ws: Path, built: Path) -> None:
    """The spawner, like the executors it made, ends at its owner's death (SIGKILL)."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(ws)], cwd=REPO,
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert owner.stdout is not None
        pids = [int(p) for p in owner.stdout.readline().split()]
        assert len(pids) == 1 + native_pool.Pool.SIZE and all(alive(p) for p in pids)
    finally:
        owner.kill()
        owner.wait(30)
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [p for p in pids if alive(p)] == []
