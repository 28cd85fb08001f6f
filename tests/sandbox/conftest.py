"""Fixtures for the sandbox tests: real namespaces, and a check that nothing leaks.

Every test is followed by a leak check: no branch cgroup, no process carrying the
test's marker, and no new mount in the host's mount table. Modules testing the command
form use the ``executor`` fixture: each of their tests runs against the native executor
and against the Python path, so both are held to the same isolation.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.sandbox import leftover_branch_cgroups, native, sandbox_available
from branching_core.sandbox.cgroups import owner_pid


def _cmdlines() -> Iterator[tuple[int, bytes]]:
    """Each host process's pid and raw command line (NUL-separated), ours excluded;
    processes that end while being read are skipped."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                yield int(entry), fh.read()
        except OSError:
            continue


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker`` (our own process excluded)."""
    return [pid for pid, cmdline in _cmdlines() if marker.encode() in cmdline]


def sleeping_with(marker: str) -> list[int]:
    """Host pids running exactly ``sleep <marker>``.

    Counting every command line that holds the marker counts passers-by too: the
    ``setsid`` that forks and exits, the ``sh -c "nohup sleep ..."`` before it exits, a
    child between its fork and its exec. A wait for two of those can end on a passing
    moment and the next count see one (this failed CI once); the settled sleeps do not.
    """
    wanted = b"sleep\0" + marker.encode() + b"\0"
    return [pid for pid, cmdline in _cmdlines() if cmdline == wanted]


def wait_until_gone(marker: str, timeout: float = 5.0) -> list[int]:
    """Poll until no process carries ``marker``; returns what is left (empty = gone)."""
    deadline = time.monotonic() + timeout
    left = processes_with(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = processes_with(marker)
    return left


SANDBOX_MOUNT_POINTS = ("/tmp", "/dev", "/run", "/proc")


def host_mounts() -> set[str]:
    """Mount points in the host's mount table (other sessions may add unrelated ones)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return {line.split()[4] for line in fh}


def leaked_mounts(before: set[str], tmp_path: Path) -> list[str]:
    """New host mounts where a sandbox mounts things (propagation gone wrong)."""
    return sorted(
        m for m in host_mounts() - before
        if m in SANDBOX_MOUNT_POINTS
        or m.startswith(("/dev/", "/proc/", "/tmp/.forkdeck-dev", f"{tmp_path}/"))
    )


@pytest.fixture(scope="session")
def sandbox_ok() -> None:
    ok, why = sandbox_available()
    if not ok:
        pytest.skip(f"sandbox unavailable here: {why}")


def native_binary_or_skip(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The executor setup.py built, with the switch that forces the Python path unset.

    Skips when the install built none (no C compiler); under FORKDECK_REQUIRE="native"
    (CI) that skip fails the run.
    """
    monkeypatch.delenv(native.ENV_SWITCH, raising=False)
    path = native.binary()
    if not os.access(path, os.X_OK):
        pytest.skip(f"native executor not built ({path} missing): install with a"
                    " C compiler (setup.py builds it)")
    return path


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The native executor's path, for tests of the executor itself."""
    return native_binary_or_skip(monkeypatch)


@pytest.fixture(params=["native", "python"])
def executor(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test's commands through the native executor, then through the Python path.

    The native case fails if any command silently took the Python path instead.
    """
    if request.param == "python":
        monkeypatch.setenv(native.ENV_SWITCH, "0")
        yield "python"
        return
    native_binary_or_skip(monkeypatch)
    before = native.fallbacks
    yield "native"
    assert native.fallbacks == before, "a command fell back to the Python path"


@pytest.fixture
def marker() -> str:
    """A unique sleep duration: ``sleep <marker>`` processes are findable on the host."""
    return f"{9000 + secrets.randbelow(900)}.{secrets.randbelow(10**6):06d}"


@pytest.fixture
def ws(tmp_path: Path, sandbox_ok: None) -> Iterator[Path]:
    """A workspace directory, and the leak check around the test."""
    mounts_before = host_mounts()
    cgroups_before = set(leftover_branch_cgroups())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    yield workspace
    # Only this process's cgroups: other sessions' tests make theirs concurrently.
    new = set(leftover_branch_cgroups()) - cgroups_before
    assert {p for p in new if owner_pid(p.name) == os.getpid()} == set(), "leaked branch cgroup"
    assert leaked_mounts(mounts_before, tmp_path) == [], "leaked mount on the host"


@pytest.fixture
def no_leftover(marker: str) -> Iterator[str]:
    yield marker
    left = wait_until_gone(marker, timeout=2.0)
    for pid in left:
        os.kill(pid, 9)
    assert left == [], f"processes with marker {marker} survived: {left}"


def cgroup_limits_unavailable() -> str | None:
    """Why cgroup limits cannot be tested here, or None."""
    from branching_core.errors import ResourceLimitError
    from branching_core.sandbox.cgroups import create_branch_cgroups
    from branching_core.sandbox.limits import ResourceLimits

    try:
        create_branch_cgroups(ResourceLimits(memory="64M", cpu=0.5, pids=64)).remove()
    except ResourceLimitError as exc:
        return str(exc)
    return None


def start_view_helper(directory: Path) -> subprocess.Popen[str]:
    """A process with a private mount namespace holding a tmpfs at ``directory``.

    It reproduces the overlay backend's ``/proc/<pid>/root/<inner>`` views.
    """
    if os.geteuid() == 0:
        argv = ["/usr/bin/unshare", "-m", "--propagation", "private"]
    else:
        argv = ["/usr/bin/unshare", "-Urm"]
    script = f"mount -t tmpfs tmpfs {directory} && echo ready && exec sleep 600"
    proc = subprocess.Popen([*argv, "/bin/sh", "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        proc.wait()
        pytest.skip("cannot create a private mount namespace with a tmpfs for the view test")
    return proc
