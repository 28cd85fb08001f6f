"""The command form: streaming, exit codes, fd 3, timeouts, asyncio."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from branching_core.errors import NamespaceError
from branching_core.sandbox import SandboxedCommand, native, run_command, run_command_async
from tests.support.killed_child import run_until_ready_then_kill

from .conftest import processes_with, wait_until_gone

# Every test runs against the native executor and the Python path (conftest.executor).
pytestmark = pytest.mark.usefixtures("executor")


def test_lines_stream_as_they_come(ws: Path) -> None:
    seen: list[tuple[str, str]] = []
    first_line = threading.Event()

    def on_output(stream: str, line: str) -> None:
        seen.append((stream, line))
        first_line.set()

    # The command blocks until the parent has seen its first line: proof of streaming.
    gate = ws / "gate"
    script = f"echo one; while [ ! -e {gate} ]; do sleep 0.01; done; echo two >&2; printf tail"
    with SandboxedCommand(script, ws, on_output=on_output) as branch:
        assert first_line.wait(timeout=30)
        assert seen == [("stdout", "one")]
        gate.touch()
        assert branch.wait(timeout=30) == 0
    assert seen == [("stdout", "one"), ("stderr", "two"), ("stdout", "tail")]
    assert branch.stdout == "one\ntail" and branch.stderr == "two\n"


def test_exit_code_signal_and_missing_program(ws: Path) -> None:
    assert run_command("exit 3", ws).exit_code == 3
    assert run_command("kill -TERM $$", ws).exit_code == -15
    missing = run_command(["/nonexistent/prog"], ws)
    assert missing.exit_code == 127 and "nonexistent" in missing.stderr


def test_fd3_score_channel(ws: Path) -> None:
    result = run_command("echo 0.95 >&3; echo done", ws, extra_fds=[3])
    assert result.exit_code == 0
    assert result.extra[3] == b"0.95\n"
    assert result.stdout == "done\n"


def test_timeout_kills_the_tree(ws: Path, no_leftover: str) -> None:
    marker = no_leftover
    result = run_command(f"setsid sleep {marker} & nohup sleep {marker} & sleep {marker}",
                         ws, timeout=0.5)
    assert result.timed_out and result.exit_code < 0
    assert wait_until_gone(marker) == []


def test_env_and_cwd(ws: Path) -> None:
    result = run_command(["sh", "-c", 'echo "$GREETING $PWD"; pwd'], ws, env={"GREETING": "hi",
                         "PATH": "/usr/bin:/bin"})
    assert result.stdout == f"hi {ws}\n{ws}\n"


def test_loopback_works_without_network(ws: Path) -> None:
    code = (
        "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen();"
        "c = socket.create_connection(s.getsockname()); print('loopback ok')"
    )
    result = run_command(["/usr/bin/python3", "-c", code], ws)
    assert result.stdout == "loopback ok\n", result.stderr


async def test_async_wrapper_and_cancellation(ws: Path, no_leftover: str) -> None:
    result = await run_command_async("echo async", ws)
    assert result.stdout == "async\n"
    task = asyncio.create_task(run_command_async(f"sleep {no_leftover}", ws))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert wait_until_gone(no_leftover) == []


def test_the_callers_interpreter_stays_reachable_under_a_private_tmp(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A virtualenv in a checkout under /tmp (a CI clone) must still run a branch's
    ``python -m pytest``; the rest of the host's /tmp stays hidden, the prefix read-only."""
    prefix = tmp_path / "venv"
    (prefix / "bin").mkdir(parents=True)
    tool = prefix / "bin" / "tool"
    tool.write_text("#!/bin/sh\necho from-the-prefix\n")
    tool.chmod(0o755)
    secret = tmp_path / "secret.txt"
    secret.write_text("host tmp\n")
    monkeypatch.setattr(sys, "prefix", str(prefix))
    assert str(tmp_path).startswith("/tmp/"), "pytest's tmp_path is expected under /tmp here"

    ran = run_command(f"{tool} && cat {secret}; touch {prefix}/new", ws)
    assert "from-the-prefix" in ran.stdout
    assert "host tmp" not in ran.stdout, "the host's /tmp leaked into the sandbox"
    assert "Read-only file system" in ran.stderr and not (prefix / "new").exists()


def test_a_command_not_found_on_path_is_127_with_its_name(ws: Path) -> None:
    result = run_command(["forkdeck-no-such-command"], ws)
    assert result.exit_code == 127
    assert result.stderr == "forkdeck-no-such-command: No such file or directory\n"


def test_a_failed_setup_is_a_one_line_namespace_error(ws: Path) -> None:
    """The command never runs; the error names the mount point that could not be made."""
    branch = SandboxedCommand("touch ran", ws, mount_at="/sys/forkdeck-nope")
    with branch, pytest.raises(NamespaceError, match=r"mount point /sys/forkdeck-nope does"
                               r" not exist and cannot be created on the read-only host"
                               ) as caught:
        branch.wait(timeout=30)
    assert "\n" not in str(caught.value)
    assert not (ws / "ran").exists()


def test_extra_fds_land_on_their_numbers_and_nothing_else_leaks(ws: Path) -> None:
    """fd 3 and 7 are captured, the rest of the caller's fds (pipes, the result and
    lifeline ends) are closed in the command."""
    result = run_command("echo three >&3; echo seven >&7; ls /proc/self/fd", ws,
                         extra_fds=[3, 7])
    assert result.exit_code == 0, result.stderr
    assert result.extra == {3: b"three\n", 7: b"seven\n"}
    # ls's own directory fd is the one extra entry.
    assert len(set(result.stdout.split()) - {"0", "1", "2", "3", "7"}) == 1, result.stdout


OWNER = """\
import sys, time
from branching_core.sandbox import SandboxedCommand
branch = SandboxedCommand("setsid sleep {marker} & nohup sleep {marker} & sleep {marker}",
                          sys.argv[1])
print("READY", branch.pid, flush=True)
time.sleep(600)
"""


def test_a_killed_owner_leaves_nothing_running(ws: Path, no_leftover: str) -> None:
    """SIGKILL of the caller: the lifeline ends, the keeper kills the pid namespace."""
    marker = no_leftover
    keeper = int(run_until_ready_then_kill(OWNER.format(marker=marker), str(ws)))
    assert wait_until_gone(marker) == []
    assert _ended(keeper), "the keeper outlived its owner"


def _ended(pid: int, timeout: float = 5.0) -> bool:
    """Whether ``pid`` exits within ``timeout`` (a zombie has: only reaping is left)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_concurrent_sandboxes_each_have_a_network_namespace_of_their_own(ws: Path) -> None:
    """Also when the namespaces come ready-made (the native executor's pool, root
    callers): never the host's, never one shared by two sandboxes."""
    gate = ws / "gate"
    script = f"readlink /proc/self/ns/net; while [ ! -e {gate} ]; do sleep 0.01; done"
    branches = [SandboxedCommand(script, ws) for _ in range(4)]
    try:
        deadline = time.monotonic() + 30
        while any(not b.stdout for b in branches) and time.monotonic() < deadline:
            time.sleep(0.01)
        namespaces = [b.stdout.strip() for b in branches]
        gate.touch()
        assert [b.wait(timeout=30) for b in branches] == [0] * 4
    finally:
        for b in branches:
            b.abort()
    assert len(set(namespaces)) == 4, namespaces
    assert os.readlink("/proc/self/ns/net") not in namespaces


def test_nothing_of_the_command_runs_once_it_has_returned(ws: Path, no_leftover: str) -> None:
    """Background children that let go of the output streams are dead by the time
    ``run_command`` returns, not merely doomed: the init ends its pid namespace before it
    reports, so the caller need not wait for the init's own exit. They hold a pipe's
    write end (fd 5): at return it must already read as closed."""
    marker = no_leftover
    r, w = os.pipe()
    try:
        result = run_command(f"sleep {marker} </dev/null >/dev/null 2>&1 & setsid sleep"
                             f" {marker} </dev/null >/dev/null 2>&1 & echo started", ws,
                             extra_fds={5: w})
        os.close(w)
        os.set_blocking(r, False)
        assert (result.exit_code, result.stdout) == (0, "started\n")
        assert os.read(r, 1) == b"", "a background child outlived the command's return"
    finally:
        os.close(r)
    assert processes_with(marker) == []


def test_run_command_drains_in_the_calling_thread(ws: Path) -> None:
    """A synchronous run_command needs no drain thread (one thread start and one
    cross-thread wake-up less per command): its on_output runs in the caller's thread,
    and nothing is lost or reordered."""
    seen: list[tuple[str, str, str]] = []

    def record(name: str, line: str) -> None:
        seen.append((threading.current_thread().name, name, line))

    result = run_command(["sh", "-c", "for i in 1 2 3; do echo $i; echo e$i >&2; done"], ws,
                         on_output=record)
    me = threading.current_thread().name
    assert result.stdout == "1\n2\n3\n" and result.stderr == "e1\ne2\ne3\n"
    assert [line for _, name, line in seen if name == "stdout"] == ["1", "2", "3"]
    assert [line for _, name, line in seen if name == "stderr"] == ["e1", "e2", "e3"]
    assert {thread for thread, _, _ in seen} == {me}


def test_a_ctrl_c_while_run_command_drains_kills_the_tree(ws: Path, no_leftover: str) -> None:
    """Interrupted in the calling thread (where it drains), run_command kills the whole
    tree, and the draining still finishes (pipes closed, keeper reaped, fds freed)."""
    native.drain_pool()  # idle executors' sockets are fds too
    fds_before = len(os.listdir("/proc/self/fd"))
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_command(f"sleep {no_leftover} & sleep {no_leftover}", ws, timeout=60)
    assert time.monotonic() - started < 30
    deadline = time.monotonic() + 10
    while len(os.listdir("/proc/self/fd")) > fds_before and time.monotonic() < deadline:
        native.drain_pool()
        time.sleep(0.02)
    assert len(os.listdir("/proc/self/fd")) <= fds_before
