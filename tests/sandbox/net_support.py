"""Helpers for the per-branch network tests: what is left of a branch's network.

A branch's network is gone when no process of its services runs (found by a marker in
their command lines), no process is in its network namespace (found by the namespace's
inode in ``/proc/*/ns/net``), its holder and stack are gone and its forward refuses.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


def stack_missing() -> str | None:
    """Why no ``private`` network can run here (None: it can): no stack installed, or a
    ``/dev/net/tun`` a normal user cannot open (mode 0600 on some hosts, this one included)."""
    from branching_core.sandbox.netstack import tun_problem

    if shutil.which("pasta") is None and shutil.which("slirp4netns") is None:
        return ("user-mode network stack unavailable: install passt or slirp4netns "
                "(.ci/run does)")
    problem = tun_problem()
    if problem is not None:
        return f"user-mode network stack unavailable for this user: {problem}"
    return None


requires_stack = pytest.mark.skipif(stack_missing() is not None, reason=stack_missing() or "")


def pids_in_netns(inode: int) -> list[int]:
    """Host pids whose network namespace has ``inode``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/net").st_ino == inode:
                found.append(int(entry))
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def port_refuses(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except OSError:
        return True


def wait_for(check: object, timeout: float = 10.0) -> bool:
    """Poll ``check()`` until it is true (or ``timeout`` passes); its last answer."""
    assert callable(check)
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() > deadline:
            return bool(check())
        time.sleep(0.05)


SERVER = r'''
import http.server, sys
# argv[1] is the test's marker: the process is findable on the host by it
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])),
                                http.server.SimpleHTTPRequestHandler).serve_forever()
'''


GATEWAY_CLIENT = r'''
import socket, struct, sys, urllib.request
for line in open("/proc/net/route").read().splitlines()[1:]:
    cols = line.split()
    if cols[1] == "00000000":
        gw = socket.inet_ntoa(struct.pack("<I", int(cols[2], 16)))
print(urllib.request.urlopen(f"http://{gw}:{sys.argv[1]}/hello.txt", timeout=10).read().decode())
'''
"""Fetches ``hello.txt`` from port argv[1] of the default gateway: the host's loopback
as the user-mode stack maps it (pasta and slirp4netns alike)."""


@contextlib.contextmanager
def serve_on_host_loopback(tmp_path: Path) -> Iterator[int]:
    """A server on the host's 127.0.0.1 only, serving ``hello.txt``; yields its port."""
    root = tmp_path / "host"
    root.mkdir()
    (root / "hello.txt").write_text("from the host\n")

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *a: object, **k: object) -> None:
            super().__init__(*a, directory=str(root), **k)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
