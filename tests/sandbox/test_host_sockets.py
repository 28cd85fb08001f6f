"""Host unix sockets are unreachable from a sandbox without network=True (issue 12, item 4).

Real servers listen on path sockets in several host places (mode 0777, in 0755
directories, so even uid 65534 could connect from outside); a sandboxed command
must get no byte from any of them, as root and as uid 65534, while sockets the
branch makes itself (in its view, in its private /tmp) keep working.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.sandbox import host_sockets as host_sockets_mod
from branching_core.sandbox import run_command
from tests.support.unprivileged import (
    assert_scenario_ok,
    chown_tree,
    make_world_readable_root,
    requires_unprivileged,
    run_as_nobody,
)

# Every test runs against the native executor and the Python path (conftest.executor).
pytestmark = pytest.mark.usefixtures("executor")

PROBE = r'''
import json, os, socket, sys
out = {}
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    try:
        s.connect(path)
        out[path] = "reached: " + s.recv(16).decode()
    except OSError as exc:
        out[path] = f"blocked: {exc.strerror}"
    finally:
        s.close()
for place in (os.getcwd(), "/tmp"):  # the branch's own sockets keep working
    own = os.path.join(place, "own.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(own)
    srv.listen()
    cli = socket.socket(socket.AF_UNIX)
    cli.connect(own)
    conn, _ = srv.accept()
    conn.sendall(b"mine")
    out["own:" + place] = cli.recv(4).decode()
    for s in (cli, conn, srv):
        s.close()
    os.unlink(own)
print(json.dumps(out))
'''


class _Server:
    """A unix stream server answering SECRET to every connection, in a thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        os.chmod(path, 0o777)
        self.sock.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"SECRET")

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.path.unlink(missing_ok=True)


@pytest.fixture
def host_sockets() -> Iterator[tuple[Path, list[str]]]:
    """A workspace outside /tmp and servers in /var/tmp, /root, /home, /srv, /, and
    the workspace's parent directory; yields (workspace, socket paths)."""
    if os.geteuid() != 0:
        pytest.skip("placing sockets in /root, /home, /srv and / needs root")
    token = secrets.token_hex(4)
    made: list[Path] = []
    servers: list[_Server] = []
    try:
        parent = Path(f"/var/tmp/forkdeck-sockets-{token}")
        for directory in (parent, Path(f"/home/forkdeck-sockets-{token}"),
                          Path(f"/srv/forkdeck-sockets-{token}")):
            directory.mkdir(mode=0o755)
            os.chmod(directory, 0o755)
            made.append(directory)
        workspace = parent / "ws"
        workspace.mkdir(mode=0o777)
        os.chmod(workspace, 0o777)
        places = [
            Path(f"/var/tmp/forkdeck-{token}.sock"),  # directly in /var/tmp
            Path(f"/root/forkdeck-{token}.sock"),
            made[1] / "x.sock",  # a home directory
            made[2] / "x.sock",
            parent / "beside-the-workspace.sock",
            Path(f"/forkdeck-{token}.sock"),  # in a directory holding mount points
        ]
        for place in places:
            servers.append(_Server(place))
        yield workspace, [str(p) for p in places]
    finally:
        for server in servers:
            server.close()
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)


def _assert_all_blocked(out: dict[str, str], paths: list[str], workspace: str) -> None:
    for path in paths:
        assert out[path].startswith("blocked"), f"{path}: {out[path]}"
    assert out["own:" + workspace] == "mine" and out["own:/tmp"] == "mine"


def test_host_sockets_unreachable_as_root(host_sockets: tuple[Path, list[str]],
                                          sandbox_ok: None) -> None:
    workspace, paths = host_sockets
    ran = run_command(["/usr/bin/python3", "-c", PROBE, *paths], workspace)
    assert ran.exit_code == 0, ran.stderr
    _assert_all_blocked(json.loads(ran.stdout), paths, str(workspace))
    # With network=True (and the homes shown) the same probe reaches them: the servers
    # were really up.
    opened = run_command(["/usr/bin/python3", "-c", PROBE, *paths], workspace, network=True,
                         expose_secrets=True)
    assert all(v == "reached: SECRET" for k, v in json.loads(opened.stdout).items()
               if k in paths), opened.stdout


NOBODY_SCENARIO = r'''
import json, socket, sys
from branching_core.sandbox import run_command
ws, probe, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
outside = {}
for path in paths:  # control: outside the sandbox uid 65534 reaches the world-open ones
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        outside[path] = s.recv(16).decode()
    except OSError as exc:
        outside[path] = exc.strerror
ran = run_command(["/usr/bin/python3", "-c", open(probe).read(), *paths], ws)
print(json.dumps({"outside": outside, "code": ran.exit_code, "stderr": ran.stderr,
                  "inside": json.loads(ran.stdout or "{}")}))
'''


@pytest.mark.unprivileged
@requires_unprivileged
def test_host_sockets_unreachable_unprivileged(host_sockets: tuple[Path, list[str]]) -> None:
    workspace, paths = host_sockets
    chown_tree(workspace)
    root = make_world_readable_root()
    try:
        probe = root / "probe.py"
        probe.write_text(PROBE)
        os.chmod(probe, 0o644)
        proc = run_as_nobody(NOBODY_SCENARIO, root=root,
                             args=[str(workspace), str(probe), *paths])
        out = json.loads(assert_scenario_ok(proc).strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    open_to_all = [p for p in paths if not p.startswith("/root/")]
    assert all(out["outside"][p] == "SECRET" for p in open_to_all), out["outside"]
    assert out["code"] == 0, out["stderr"]
    _assert_all_blocked(out["inside"], paths, str(workspace))


# The caller caches the socket walk (host_sockets.plan_socket_hiding); these check that
# the cache never outlives what it was computed from. RACY_NS=0 lets a walk be cached
# right after the test touched a directory (the default refuses walks of directories
# changed within 2 s: their next change could fall in the same timestamp tick); the
# short sleeps only make sure a later change gets a later timestamp.
_SKIP = ("/tmp", "/dev", "/proc", "/run")


def _cached_twice(skip: tuple[str, ...]) -> host_sockets_mod.SocketPlan:
    """A plan the cache returned twice in a row (other sessions may touch ``/``)."""
    for _ in range(50):
        first = host_sockets_mod.plan_socket_hiding(skip)
        if host_sockets_mod.plan_socket_hiding(skip) is first:
            return first
        time.sleep(0.05)
    raise AssertionError("the socket walk was never reused")


def test_cached_walk_sees_a_socket_made_later(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("placing a socket in / needs root")
    monkeypatch.setattr(host_sockets_mod, "RACY_NS", 0)
    path = Path(f"/forkdeck-cache-{secrets.token_hex(4)}.sock")
    before = _cached_twice(_SKIP)
    assert str(path) not in before.socket_files
    time.sleep(0.05)
    server = _Server(path)
    try:
        after = host_sockets_mod.plan_socket_hiding(_SKIP)
        assert after is not before and str(path) in after.socket_files
    finally:
        server.close()


def test_cached_walk_sees_a_new_mount(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting in the host's namespace needs root")
    monkeypatch.setattr(host_sockets_mod, "RACY_NS", 0)
    point = tmp_path / "m"
    point.mkdir()
    before = _cached_twice(_SKIP)
    assert str(point) not in before.mount_points
    subprocess.run(["mount", "-t", "tmpfs", "forkdeck-cache-test", str(point)], check=True)
    try:
        assert str(point) in host_sockets_mod.plan_socket_hiding(_SKIP).mount_points
    finally:
        subprocess.run(["umount", str(point)], check=True)
    assert str(point) not in host_sockets_mod.plan_socket_hiding(_SKIP).mount_points


def test_socket_made_after_a_cached_walk_is_unreachable(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sandbox_ok: None) -> None:
    if os.geteuid() != 0:
        pytest.skip("placing a socket in / needs root")
    monkeypatch.setattr(host_sockets_mod, "RACY_NS", 0)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for _ in range(2):  # the walk is made and cached
        assert run_command(["true"], workspace).exit_code == 0
    time.sleep(0.05)
    path = f"/forkdeck-cache-{secrets.token_hex(4)}.sock"
    server = _Server(Path(path))
    try:
        ran = run_command(["/usr/bin/python3", "-c", PROBE, path], workspace)
        assert ran.exit_code == 0, ran.stderr
        _assert_all_blocked(json.loads(ran.stdout), [path], str(workspace))
    finally:
        server.close()


def test_sandboxed_commands_reuse_the_walk(tmp_path: Path, sandbox_ok: None) -> None:
    """The namespace check must not drop the cache by itself (a /proc ns inode's times
    change on every lookup)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for _ in range(50):  # other sessions' tests touch / now and then
        assert run_command(["true"], workspace).exit_code == 0
        walks = dict(host_sockets_mod._walks)
        assert run_command(["true"], workspace).exit_code == 0
        if any(host_sockets_mod._walks.get(key) is walked for key, walked in walks.items()):
            return
        time.sleep(0.1)
    raise AssertionError("every sandboxed command walked the host again")
