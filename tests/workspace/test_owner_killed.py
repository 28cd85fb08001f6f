"""Nothing of ours outlives its owner: after a SIGKILL at any instant, every process the
owner started (mount helper, pooled executors, sandbox keepers, ``rm`` of the trash,
``find``) is gone, not only exiting.

The test process becomes a child subreaper, so the owner's orphans are reparented to it
and can be seen (and reaped) here, whatever the machine's pid 1 does with zombies: an
"empty command line" still listed after the owner died was such a zombie, already gone
but unreaped by a pid 1 that does not reap, or an ``rm -rf`` of a big trash still
running. A process that has exited is a zombie (state Z) here; anything else found once
the owner's tree has had time to end is left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PR_SET_CHILD_SUBREAPER = 36


def _children_of(pid: int) -> dict[int, tuple[str, str]]:
    """pid -> (state, cmdline) of every process whose parent is ``pid``."""
    found: dict[int, tuple[str, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            found[int(entry)] = (fields[0], cmd.strip())
    return found


@pytest.fixture
def subreaper() -> Iterator[None]:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip("cannot become a child subreaper")
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _reap_zombies(me: int) -> None:
    for pid, (state, _cmd) in _children_of(me).items():
        if state == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


@pytest.mark.parametrize("backend", ["copy", "overlay"])
def test_nothing_outlives_its_owner(tmp_path: Path, subreaper: None, backend: str) -> None:
    me = os.getpid()
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    left: list[str] = []
    for trial in range(8):
        root = tmp_path / f"ws{trial}"
        root.mkdir()
        before = set(_children_of(me))
        owner = subprocess.Popen(
            [sys.executable, "-m", "tests.workspace.owner_kill_workload", str(root), backend],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert owner.stdout is not None
        line = owner.stdout.readline()
        if line.strip() != "ready":
            owner.kill()
            _out, err = owner.communicate()
            if "unavailable" in err and backend == "overlay":
                pytest.skip(f"overlay backend unavailable here: {err.strip()[-200:]}")
            raise AssertionError(err)
        time.sleep(rng.uniform(0.05, 0.6))
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        # The owner's orphans are ours now. Each must end by itself: give it time to
        # (a loaded machine), then anything not a zombie is left behind.
        deadline = time.monotonic() + 10
        while True:
            alive = {pid: info for pid, info in _children_of(me).items()
                     if pid not in before and info[0] != "Z"}
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        left += [f"trial {trial}: {pid} {info}" for pid, info in alive.items()]
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
        _reap_zombies(me)
    assert left == [], left


def test_an_rm_of_the_trash_dies_with_its_owner(tmp_path: Path, subreaper: None) -> None:
    """The abort's trash (40,000 files) is removed by an ``rm`` child; the owner is
    SIGKILLed while it runs: the ``rm`` is killed too (``PR_SET_PDEATHSIG``), it does not
    go on by itself. What it leaves is trash, swept by the next open."""
    import shutil

    if shutil.which("setpriv") is None:
        pytest.skip("util-linux setpriv is not installed (it sets PR_SET_PDEATHSIG for rm)")
    root = tmp_path / "ws"
    root.mkdir()
    owner = subprocess.Popen(
        [sys.executable, "-m", "tests.workspace.owner_kill_workload", str(root), "copy",
         "big-trash"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert owner.stdout is not None
    assert owner.stdout.readline().strip() == "ready", owner.stderr
    rm = None
    deadline = time.monotonic() + 120
    while rm is None and time.monotonic() < deadline and owner.poll() is None:
        rm = next((pid for pid, (_s, cmd) in _children_of(owner.pid).items()
                   if cmd.startswith("rm -rf")), None)
        time.sleep(0.001)
    assert rm is not None, "the abort's trash was not removed by an rm child"
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    _pid, status = os.waitpid(rm, 0)  # an orphan of the owner: ours to reap (subreaper)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (
        f"rm went on after its owner died and ended by itself ({status:#x})"
    )
