"""Who holds a store session: the owner recorded in the lock file, not whoever shares it.

The flock of ``sessions/<sid>.lock`` is shared by every child the owner forks until the
child execs; ``session_lock.held_by_live_owner`` counts it only while the recorded owner
runs, and falls back on the flock alone whenever it cannot tell (a lock written by an
older release). Real processes throughout: a held lock is held by another process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from branching_core.workspace.session_lock import held_by_live_owner

HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
if sys.argv[2] == "claim":
    from branching_core.workspace.session_lock import claim
    claim(fd)
elif sys.argv[2] != "none":
    os.pwrite(fd, sys.argv[2].encode(), 0)
print("held", flush=True)
sys.stdin.read()
"""
REPO = Path(__file__).resolve().parents[2]
Hold = Callable[[str], Path]


@pytest.fixture
def hold(tmp_path: Path) -> Iterator[Hold]:
    """``hold(record)``: another process flocks a lock file and writes ``record`` into it
    (``claim``: its real identity; ``none``: nothing, as an older release)."""
    procs: list[subprocess.Popen[str]] = []

    def start(record: str) -> Path:
        lock = tmp_path / f"s{len(procs)}.lock"
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(lock), record],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        return lock

    yield start
    for proc in procs:
        proc.communicate(input="")


def _alive(lock: Path) -> bool:
    fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    try:
        return held_by_live_owner(fd)
    finally:
        os.close(fd)


def test_a_lock_held_by_its_recorded_owner_is_alive(hold: Hold) -> None:
    assert _alive(hold("claim"))


def test_a_free_lock_is_dead(tmp_path: Path) -> None:
    lock = tmp_path / "free.lock"
    lock.write_text(f"{os.getpid()} 1 x\n")
    assert not _alive(lock)


def test_an_older_release_lock_is_judged_by_the_flock_alone(hold: Hold) -> None:
    assert _alive(hold("none"))


def test_a_held_lock_whose_recorded_owner_is_gone_is_dead(hold: Hold) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    namespace = os.readlink("/proc/self/ns/pid")
    assert not _alive(hold(f"{gone.stdout.strip()} 1 {namespace}\n"))


def test_a_reused_pid_is_not_the_owner(hold: Hold) -> None:
    """The recorded pid runs, but started at another time: another process."""
    namespace = os.readlink("/proc/self/ns/pid")
    assert not _alive(hold(f"{os.getpid()} 1 {namespace}\n"))


def test_an_owner_in_another_pid_namespace_is_judged_by_the_flock_alone(
    hold: Hold,
) -> None:
    assert _alive(hold("1 1 pid:[1]\n"))
