"""The launcher (pre-started fork server) for command sandboxes.

Real processes throughout: the launcher is a real ``python -S -I`` process, owners
are real Python subprocesses killed with SIGKILL, and the commands are real
sandboxes. What is checked is what the caller relies on: commands really go through
the launcher, it dies with its owner and leaves nothing behind, and when it cannot
start or dies the direct path takes over, said once in the log.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.sandbox import SandboxedCommand, run_command
from branching_core.sandbox import launcher as launcher_mod

from .conftest import processes_with, wait_until_gone

REPO = Path(__file__).resolve().parents[2]


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        data = fh.read()
    return int(data[data.rindex(b")") + 2:].split()[1])


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
            if state == b"Z":  # exited; only its parent's reaping is left
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def fresh_launcher(monkeypatch: pytest.MonkeyPatch) -> Iterator[launcher_mod.Launcher]:
    """This process's launcher, started anew and ready; shut down afterwards."""
    monkeypatch.delenv(launcher_mod.ENV_SWITCH, raising=False)
    launcher_mod.shutdown()
    got = launcher_mod.wait_ready(30)
    if got is None:
        pytest.fail("the launcher did not start: see the log")
    yield got
    launcher_mod.shutdown()


def test_commands_are_forked_by_the_launcher(
    ws: Path, no_leftover: str, fresh_launcher: launcher_mod.Launcher
) -> None:
    assert fresh_launcher.proc is not None
    with SandboxedCommand(f"sleep {no_leftover}", ws) as branch:
        # The keeper is the launcher's child, not ours: our interpreter was not forked.
        assert _ppid(branch.pid) == fresh_launcher.proc.pid
        assert branch.alive
    assert branch.exit_code == -signal.SIGKILL
    result = run_command("echo out; echo err >&2; exit 7", ws)
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")


def test_the_launcher_holds_nothing_of_the_owner(fresh_launcher: launcher_mod.Launcher) -> None:
    """It is a lean interpreter: none of the owner's heavy modules, a small footprint."""
    assert fresh_launcher.proc is not None
    pid = fresh_launcher.proc.pid
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert "site-packages" not in maps  # no third-party extension module loaded
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = int(next(line.split()[1] for line in status.splitlines()
                      if line.startswith("VmRSS:")))
    assert rss_kb < 64 * 1024


OWNER = textwrap.dedent("""\
    import sys, time
    from branching_core.sandbox import SandboxedCommand, launcher
    got = launcher.wait_ready(30)
    assert got is not None and got.proc is not None
    branch = SandboxedCommand("setsid sleep {marker} & sleep {marker}", sys.argv[1])
    print(got.proc.pid, branch.pid, flush=True)
    time.sleep(600)
""")


def test_killed_owner_takes_launcher_and_sandboxes_with_it(ws: Path, no_leftover: str) -> None:
    marker = no_leftover
    env = {k: v for k, v in os.environ.items() if k != launcher_mod.ENV_SWITCH}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER.format(marker=marker), str(ws)], cwd=REPO,
        stdout=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert owner.stdout is not None
        launcher_pid, keeper_pid = map(int, owner.stdout.readline().split())
        deadline = time.monotonic() + 10
        while len(processes_with(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(processes_with(marker)) >= 2
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert wait_until_gone(marker) == []
        assert _gone(keeper_pid)
        assert _gone(launcher_pid), "the launcher outlived its owner"
    finally:
        owner.kill()
        owner.wait()


FALLBACK = textwrap.dedent("""\
    import logging, sys
    logging.basicConfig(level=logging.WARNING, format="LOG %(name)s %(message)s")
    from branching_core.sandbox import run_command
    for _ in range(3):
        r = run_command("echo ok; exit 3", sys.argv[1])
        print(r.exit_code, r.stdout.strip(), flush=True)
""")


def test_launcher_that_cannot_start_falls_back_and_says_so_once(ws: Path) -> None:
    env = {**os.environ, launcher_mod.ENV_SWITCH: "wait",
           launcher_mod.ENV_PYTHON: "/bin/false"}  # exits at once: never ready
    proc = subprocess.run([sys.executable, "-c", FALLBACK, str(ws)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["3 ok"] * 3
    notes = [line for line in proc.stderr.splitlines() if line.startswith("LOG ")]
    assert len(notes) == 1, proc.stderr
    assert "launcher unavailable" in notes[0] and "exited with code 1" in notes[0]


def test_launcher_killed_mid_run_kills_the_tree_and_the_direct_path_takes_over(
    ws: Path, no_leftover: str, fresh_launcher: launcher_mod.Launcher,
    caplog: pytest.LogCaptureFixture,
) -> None:
    marker = no_leftover
    assert fresh_launcher.proc is not None
    branch = SandboxedCommand(f"setsid sleep {marker} & sleep {marker}", ws)
    deadline = time.monotonic() + 10
    while len(processes_with(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    fresh_launcher.proc.send_signal(signal.SIGKILL)
    with caplog.at_level(logging.WARNING, logger=launcher_mod.__name__):
        assert branch.wait(timeout=10) == -signal.SIGKILL
        assert wait_until_gone(marker) == []
        result = run_command("echo still works", ws)
    assert (result.exit_code, result.stdout) == (0, "still works\n")
    assert any("launcher unavailable" in r.getMessage() for r in caplog.records)


def test_shutdown_ends_the_launcher(fresh_launcher: launcher_mod.Launcher) -> None:
    assert fresh_launcher.proc is not None
    pid = fresh_launcher.proc.pid
    launcher_mod.shutdown()
    assert _gone(pid)
    assert fresh_launcher.proc.returncode == 0


ONE_THEN_TWO = textwrap.dedent("""\
    import sys
    from branching_core.sandbox import launcher, run_command
    run_command("true", sys.argv[1])
    print(launcher._current is None, flush=True)
    run_command("true", sys.argv[1])
    print(launcher._current is not None, flush=True)
""")


def test_a_one_command_process_does_not_start_the_launcher(ws: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != launcher_mod.ENV_SWITCH}
    proc = subprocess.run([sys.executable, "-c", ONE_THEN_TWO, str(ws)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]
