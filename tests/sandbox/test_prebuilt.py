"""Pre-built sandboxes: a waiting executor builds the last command's sandbox ahead, and
a request uses it only when its freshly computed plan key is the same.

Real namespaces, mounts and cgroups; the evidence is structural (the sandbox's mount
namespace existed before the command was asked for), never a wall-clock time.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from branching_core.errors import NamespaceError
from branching_core.sandbox import ResourceLimits, native, native_pool, run_command
from branching_core.sandbox import host_sockets as host_sockets_mod
from tests.sandbox.conftest import native_binary_or_skip
from tests.support.killed_child import REPO
from tests.support.procs import alive

from .conftest import cgroup_limits_unavailable

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="sandboxes are pre-built for root callers only")


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(native_pool.ENV_POOL, raising=False)
    path = native_binary_or_skip(monkeypatch)
    native_pool.drain_executors()
    return path


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


def _prebuilt(count: int = native_pool.Pool.SIZE, timeout: float = 20.0) -> dict[int, str]:
    """The idle executors' pre-built inits: {init pid: its mount namespace}, once
    ``count`` executors have built the sandbox the pool was last told about."""
    pool = native_pool.pool()
    deadline = time.monotonic() + timeout
    while True:
        with pool.lock:
            want = pool.prebuild.key if pool.prebuild is not None else None
            keepers = [i.pid for i in pool.ready if want is not None and i.key == want]
        inits = {init: os.readlink(f"/proc/{init}/ns/mnt")
                 for keeper in keepers for init in _children(keeper)}
        if len(inits) >= count:
            return inits
        assert time.monotonic() < deadline, "no sandbox was pre-built"
        pool.refill()  # one that let its sandbox go since the last command is replaced
        time.sleep(0.01)


def _twice(ws: Path | str) -> None:
    """Two commands in ``ws``: the second tells the pool to build its sandbox ahead (a
    single command per sandbox, like a batch of siblings, builds nothing ahead)."""
    for _ in range(2):
        assert run_command(["true"], ws).exit_code == 0


def _mntns(ws: Path) -> str:
    ran = run_command(["readlink", "/proc/self/ns/mnt"], ws)
    assert ran.exit_code == 0, ran.stderr
    return ran.stdout.strip()


def test_the_next_command_in_the_branch_runs_in_the_pre_built_sandbox(
        ws: Path, built: Path) -> None:
    (ws / "file").write_text("branch\n")
    _twice(ws)
    inits = _prebuilt()
    used = native.prebuilt_used
    # Its mount namespace existed before the command was asked for: built ahead.
    assert _mntns(ws) in set(inits.values())
    assert native.prebuilt_used == used + 1
    inits = _prebuilt()
    ran = run_command(["sh", "-c", "cat file; pwd; hostname; echo new > made"], ws)
    assert (ran.exit_code, ran.stdout) == (0, f"branch\n{ws}\nforkdeck\n")
    assert (ws / "made").read_text() == "new\n"
    assert native.prebuilt_used == used + 2


def test_another_branch_never_runs_in_a_sandbox_built_for_another_view(
        tmp_path: Path, sandbox_ok: None, built: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for ws in (a, b):
        ws.mkdir()
        (ws / "who").write_text(ws.name + "\n")
    _twice(a)
    _prebuilt()
    used = native.prebuilt_used
    # (A namespace's inode number is reused once it is freed: the sandboxes built for a,
    # let go when b's command comes, are no evidence either way; the counter is.)
    ran = run_command(["cat", "who"], b)
    assert (ran.exit_code, ran.stdout) == (0, "b\n")
    assert native.prebuilt_used == used
    # And back: once b's sandbox is built ahead, a's command again gets its own.
    _twice(b)
    _prebuilt()
    used = native.prebuilt_used
    ran = run_command(["cat", "who"], a)
    assert (ran.exit_code, ran.stdout) == (0, "a\n")
    assert native.prebuilt_used == used
    _twice(a)
    _prebuilt()
    used = native.prebuilt_used
    ran = run_command(["cat", "who"], a)
    assert (ran.exit_code, ran.stdout, native.prebuilt_used) == (0, "a\n", used + 1)


def test_a_view_replaced_at_the_same_path_is_not_served_by_the_old_sandbox(
        ws: Path, built: Path) -> None:
    (ws / "who").write_text("old")
    _twice(ws)
    _prebuilt()
    used = native.prebuilt_used
    old = ws.with_name("old-ws")
    ws.rename(old)
    ws.mkdir()
    (ws / "who").write_text("new")
    ran = run_command(["cat", "who"], ws)
    assert (ran.exit_code, ran.stdout) == (0, "new")
    assert native.prebuilt_used == used


SOCKET_PROBE = r'''
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("reached")
except OSError as exc:
    print("blocked", exc.errno)
'''


def test_a_socket_made_after_the_pre_build_stays_unreachable(
        ws: Path, built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setattr(host_sockets_mod, "RACY_NS", 0)
    _twice(ws)
    _prebuilt()
    used = native.prebuilt_used
    path = f"/forkdeck-prebuilt-{secrets.token_hex(4)}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    try:
        ran = run_command(["/usr/bin/python3", "-c", SOCKET_PROBE, path], ws)
        assert ran.exit_code == 0, ran.stderr
        assert ran.stdout.startswith("blocked"), ran.stdout
        assert native.prebuilt_used == used  # the plan changed: built anew, normally
        ran = run_command(["/usr/bin/python3", "-c", SOCKET_PROBE, path], ws)
        assert ran.stdout.startswith("blocked"), ran.stdout
        _prebuilt()  # now pre-built with the socket in the plan: still hidden there
        ran = run_command(["/usr/bin/python3", "-c", SOCKET_PROBE, path], ws)
        assert ran.stdout.startswith("blocked"), ran.stdout
        assert native.prebuilt_used == used + 1
    finally:
        server.close()
        os.unlink(path)


def test_a_secret_made_after_the_pre_build_is_masked(
        tmp_path: Path, sandbox_ok: None, built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from branching_core.sandbox import masks

    monkeypatch.setattr(masks, "_RACY_NS", 0)
    base = Path(f"/var/tmp/forkdeck-prebuilt-{secrets.token_hex(4)}")
    creds = base / "creds" / "service.json"
    creds.parent.mkdir(parents=True)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    ws = tmp_path / "ws"
    ws.mkdir()
    try:
        _twice(ws)
        _prebuilt()
        used = native.prebuilt_used
        creds.write_text("CLOUD KEY\n")
        ran = run_command(["cat", str(creds)], ws)
        assert ran.exit_code != 0 and "CLOUD KEY" not in ran.stdout
        assert native.prebuilt_used == used
    finally:
        native_pool.drain_executors()
        creds.unlink(missing_ok=True)
        creds.parent.rmdir()
        base.rmdir()


_NO_CGROUPS = cgroup_limits_unavailable()
requires_cgroups = pytest.mark.skipif(_NO_CGROUPS is not None, reason=_NO_CGROUPS or "")


@requires_cgroups
def test_memory_limits_apply_to_a_pre_built_sandbox(ws: Path, built: Path) -> None:
    _twice(ws)
    _prebuilt()
    used = native.prebuilt_used
    hog = "b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096]); print('survived')"
    ran = run_command(["/usr/bin/python3", "-c", hog], ws, limits=ResourceLimits(memory="64M"),
                      timeout=60)
    assert native.prebuilt_used == used + 1
    assert ran.oom_killed and "survived" not in ran.stdout


@requires_cgroups
def test_pids_limits_apply_to_a_pre_built_sandbox(ws: Path, built: Path) -> None:
    _twice(ws)
    _prebuilt()
    used = native.prebuilt_used
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 2; echo survived"
    ran = run_command(["bash", "-c", bomb], ws, limits=ResourceLimits(pids=64), timeout=20)
    assert native.prebuilt_used == used + 1
    assert "fork: retry" in ran.stderr or "Resource temporarily unavailable" in ran.stderr


OWNER = r"""
import os, sys, time
from branching_core.sandbox import native_pool, run_command
run_command(["true"], sys.argv[1])
run_command(["true"], sys.argv[1])
pool = native_pool.pool()
while True:
    with pool.lock:
        keepers = [i.pid for i in pool.ready if i.key is not None]
    inits = []
    for k in keepers:
        with open(f"/proc/{k}/task/{k}/children") as fh:
            inits += fh.read().split()
    if len(keepers) == native_pool.Pool.SIZE and len(inits) == len(keepers):
        break
    time.sleep(0.01)
print(*keepers, *inits, flush=True)
time.sleep(600)
"""


def test_a_killed_owner_leaves_no_pre_built_executor_or_init(ws: Path, built: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(ws)], cwd=REPO,
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert owner.stdout is not None
        pids = [int(p) for p in owner.stdout.readline().split()]
        assert len(pids) == 2 * native_pool.Pool.SIZE and all(alive(p) for p in pids)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [p for p in pids if alive(p)] == []


def test_drain_ends_pre_built_executors_and_their_inits(ws: Path, built: Path) -> None:
    _twice(ws)
    inits = _prebuilt()
    keepers = native_pool.pool().idle_pids()
    native.drain_pool()
    assert native_pool.pool().idle_pids() == []
    for pid in [*keepers, *inits]:
        assert not alive(pid)


def test_switched_off_nothing_is_pre_built(ws: Path, built: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native_pool.ENV_POOL, "0")
    used = native.prebuilt_used
    for _ in range(3):
        assert run_command(["true"], ws).exit_code == 0
    time.sleep(0.2)
    assert native_pool.pool().idle_pids() == [] and native.prebuilt_used == used


def test_the_pre_built_command_gets_exactly_its_fds_and_environment(
        ws: Path, built: Path) -> None:
    _twice(ws)
    _prebuilt()
    r, w = os.pipe()
    try:
        ran = run_command(["sh", "-c", "echo via5 >&5; ls /proc/self/fd; echo $ONLY"], ws,
                          extra_fds={5: w}, env={"ONLY": "this", "PATH": os.environ["PATH"]})
        os.close(w)
        w = -1
        assert os.read(r, 100) == b"via5\n"
        lines = ran.stdout.split()
        assert lines[-1] == "this"
        assert sorted(int(fd) for fd in lines[:-1]) == [0, 1, 2, 3, 5]  # 3: ls's own dir
        assert json.dumps(ran.exit_code) == "0"
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_passed_fds_at_the_numbers_the_keeper_uses_reach_the_command(
        ws: Path, built: Path) -> None:
    """The keeper holds fds of its own (the owner's socket, its init's, the host's root,
    the mount table's watch) at low numbers: a command's fd wanted at one of them must
    move them aside, not land there (it was closed with the owner's socket: "handing the
    command to the pre-built sandbox failed: Bad file descriptor")."""
    _twice(ws)
    _prebuilt()
    pipes = {n: os.pipe() for n in range(3, 10)}  # (sh: single-digit fds)
    try:
        script = "; ".join(f"echo {n} >&{n}" for n in pipes)
        ran = run_command(["sh", "-c", script], ws,
                          extra_fds={n: w for n, (_, w) in pipes.items()})
        assert ran.exit_code == 0, ran.stderr
        for n, (r, w) in pipes.items():
            os.close(w)
            assert os.read(r, 100) == f"{n}\n".encode()
        assert native.prebuilt_used > 0
    finally:
        for r, w in pipes.values():
            for fd in (r, w):
                with contextlib.suppress(OSError):
                    os.close(fd)


def test_an_overlay_branch_view_is_pre_built_in_its_helpers_namespace(
        tmp_path: Path, sandbox_ok: None, built: Path) -> None:
    """The overlay backend's views live in its view helper's mount namespace: the
    pre-built sandbox clones the view there, and serves only that branch."""
    from branching_core.workspace import Workspace

    project = tmp_path / "project"
    project.mkdir()
    (project / "seed.txt").write_text("seed\n")
    ws = Workspace(project, backend="overlay")
    try:
        with ws.branch("one", on_success=None) as one, ws.branch("two", on_success=None) as two:
            _twice(one.path)
            _prebuilt()
            used = native.prebuilt_used
            ran = run_command("cat seed.txt; echo one > mine.txt", one.path, timeout=60)
            assert (ran.exit_code, ran.stdout) == (0, "seed\n"), ran.stderr
            assert native.prebuilt_used == used + 1
            assert (Path(one.path) / "mine.txt").read_text() == "one\n"
            _prebuilt()
            ran = run_command("cat mine.txt", two.path, timeout=60)  # not one's sandbox
            assert ran.exit_code != 0 and "one" not in ran.stdout
            assert native.prebuilt_used == used + 1
            one.abort()
            two.abort()
    finally:
        native_pool.drain_executors()
        ws.close()
    assert not (project / "mine.txt").exists()


def test_a_secret_replaced_after_the_pre_build_is_still_masked(
        tmp_path: Path, sandbox_ok: None, built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Replacing a masked file (write a new one, rename it over: what tools refreshing a
    token do) detaches the mask mount in every namespace. The plan stays the same (same
    path), but the key holds each hidden secret's inode, so the next command gets a
    sandbox built afresh (the executor also watches its sandbox's mount table, which
    this kernel does not always report the detach to); the one after pre-builds again."""
    from branching_core.sandbox import masks

    monkeypatch.setattr(masks, "_RACY_NS", 0)
    # Directly in / (no socket-hiding overlay above it: the mask sits on the host's
    # own dentry, which the replacement detaches it from).
    creds = Path(f"/forkdeck-prebuilt-{secrets.token_hex(4)}.json")
    creds.write_text("OLD KEY\n")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    ws = tmp_path / "ws"
    ws.mkdir()
    try:
        for _ in range(2):
            ran = run_command(["cat", str(creds)], ws)
            assert ran.exit_code != 0 and "OLD KEY" not in ran.stdout
        _prebuilt()
        fresh = creds.with_name("fresh-" + creds.name)
        fresh.write_text("NEW KEY\n")
        fresh.rename(creds)
        for _ in range(3):
            try:
                ran = run_command(["cat", str(creds)], ws)
            except NamespaceError as exc:  # the request met the change in flight: refused
                assert "run it again" in str(exc)
                continue
            assert ran.exit_code != 0 and "NEW KEY" not in ran.stdout, ran.stdout
        _prebuilt()  # the new secret's sandbox, used twice: built ahead again
        ran = run_command(["cat", str(creds)], ws)
        assert ran.exit_code != 0 and "NEW KEY" not in ran.stdout, ran.stdout
    finally:
        native_pool.drain_executors()
        creds.unlink(missing_ok=True)
        creds.with_name("fresh-" + creds.name).unlink(missing_ok=True)


def test_a_request_for_another_sandbox_stops_the_building_ahead_at_once(
        tmp_path: Path, sandbox_ok: None, built: Path) -> None:
    # The filler thread must not build a's sandbox into new executors between b's take
    # and b's ``remember``: those would carry a's key and serve nobody (CI once saw the
    # next command in b find only such executors and start afresh).
    a, b = tmp_path / "a", tmp_path / "b"
    for ws in (a, b):
        ws.mkdir()
    _twice(a)
    _prebuilt()
    pool = native_pool.pool()
    assert pool.prebuild is not None
    idle = pool.take(native.binary(), "a key no sandbox has")
    try:
        assert pool.prebuild is None  # decided under the take's lock, not after it
    finally:
        if idle is not None:
            idle.discard()
    _twice(b)
    inits = _prebuilt()
    with pool.lock:
        keys = {i.key for i in pool.ready}
    assert inits and keys == {pool.prebuild.key if pool.prebuild else None}
