"""How a command is started: the executor's own vfork + execve keeps posix_spawnp's
rules (the search of PATH, the exit codes and messages of a command that cannot run, no
/bin/sh for a file without ``#!``, the signal dispositions it starts with), and the
background pre-build of the next sandbox never leaves a command, or a waiting executor,
at the idle scheduling policy.

Held against both executors where the rule is theirs alike (``executor``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from branching_core.sandbox import native_pool, run_command
from tests.support.killed_child import REPO


def _ignored(status: str) -> int:
    line = next(x for x in status.splitlines() if x.startswith("SigIgn:"))
    return int(line.split()[1], 16)


def test_a_name_is_searched_in_path_and_missing_commands_exit_127(
    ws: Path, executor: str
) -> None:
    found = run_command(["true"], ws)
    assert found.exit_code == 0, found.stderr
    missing = run_command(["forkdeck-no-such-command"], ws)
    assert missing.exit_code == 127
    assert "forkdeck-no-such-command: No such file or directory" in missing.stderr
    absent = run_command([str(ws / "absent")], ws)
    assert absent.exit_code == 127


def test_what_cannot_be_executed_exits_126_and_never_goes_to_the_shell(
    ws: Path, executor: str
) -> None:
    script = ws / "no-shebang"
    script.write_text("echo ran-by-a-shell\n")
    script.chmod(0o755)
    not_executable = ws / "not-executable"
    not_executable.write_text("#!/bin/sh\necho ran\n")
    for path, why in ((script, "Exec format error"), (not_executable, "Permission denied"),
                      (ws, "Permission denied")):
        result = run_command([str(path)], ws)
        assert result.exit_code == 126, (path, result)
        assert "ran" not in result.stdout
        assert why in result.stderr


def test_sigpipe_sigxfsz_and_sigint_start_at_their_default_action(
    ws: Path, executor: str
) -> None:
    # Python (the caller) ignores SIGPIPE and SIGXFSZ; the command must not inherit that.
    status = run_command(["cat", "/proc/self/status"], ws)
    assert status.exit_code == 0, status.stderr
    ignored = _ignored(status.stdout)
    for sig in (2, 13, 25):  # SIGINT, SIGPIPE, SIGXFSZ
        assert not ignored & (1 << (sig - 1)), hex(ignored)
    piped = run_command(["sh", "-c", "kill -PIPE $$"], ws)
    assert piped.exit_code == -13


@pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes are pre-built for root callers only")
def test_pre_built_commands_run_with_the_callers_policy_and_nice_value(
    tmp_path: Path, sandbox_ok: None
) -> None:
    """The next sandbox is built at SCHED_IDLE; the command must still get exactly the
    caller's scheduling (here SCHED_BATCH and nice 3), in a sandbox built ahead."""
    ws = tmp_path / "ws"
    ws.mkdir()
    probe = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPO)!r})
        os.environ.pop("FORKDECK_NATIVE", None)
        os.environ.pop("FORKDECK_NATIVE_POOL", None)
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        os.nice(3)
        from branching_core.sandbox import native, run_command
        from branching_core.sandbox.native import drain_pool
        seen = []
        for _ in range(4):
            r = run_command(["sh", "-c", "grep '^policy' /proc/self/sched; "
                             "cut -d' ' -f19 /proc/self/stat"], {str(ws)!r})
            seen.append(" ".join(r.stdout.split()))
        drain_pool()
        print(native.prebuilt_used)
        print("\\n".join(seen))
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    used, *seen = out.stdout.splitlines()
    assert int(used) >= 1, out.stdout  # some ran in a sandbox built in the background
    assert seen == ["policy : 3 3"] * 4, seen  # SCHED_BATCH, nice 3: never SCHED_IDLE


def _policy(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/sched", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("policy"):
                    return int(line.split(":")[1])
    except OSError:
        return None
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes are pre-built for root callers only")
def test_waiting_pre_built_executors_are_back_at_the_normal_policy(
    ws: Path, built: Path
) -> None:
    """Once built, a waiting executor and its init are at the owner's policy again: a
    request must not wait for an idle-policy process to be given a CPU."""
    os.environ.pop(native_pool.ENV_POOL, None)
    native_pool.drain_executors()
    try:
        for _ in range(3):
            assert run_command(["true"], ws).exit_code == 0
        pool = native_pool.pool()
        deadline = time.monotonic() + 20
        while True:
            with pool.lock:
                keepers = [i.pid for i in pool.ready if i.key is not None]
            procs = list(keepers)
            for keeper in keepers:
                try:
                    with open(f"/proc/{keeper}/task/{keeper}/children") as fh:
                        procs += [int(p) for p in fh.read().split()]
                except OSError:
                    pass
            policies = [_policy(p) for p in procs]
            if len(procs) > len(keepers) > 0 and all(p == 0 for p in policies):
                break
            assert time.monotonic() < deadline, (procs, policies)
            time.sleep(0.05)
    finally:
        native_pool.drain_executors()
