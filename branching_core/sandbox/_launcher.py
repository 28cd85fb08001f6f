"""The launcher process: a lean fork server that starts command sandboxes.

It runs as ``python -S -I`` with only this module, ``_spawn``, ``namespaces`` and
``_command_init`` imported (see ``launcher.BOOT``), so forking a sandbox's keeper
copies a ~20 MB process instead of the caller's interpreter (pydantic-ai, the TUI,
the agent's history: hundreds of MB of page tables to copy, twice per sandbox).
It does the same thing the caller's direct path does, with the same code: the
keeper it forks joins the cgroups, unshares the namespaces and forks the init.

Protocol, on a unix stream socket the owner alone holds the other end of:

* the launcher sends ``R`` once it is ready;
* a request is an 8-byte header ``<payload length, fd count>`` carrying the fds
  (``SCM_RIGHTS``), then a pickled dict. The fds are: a per-request status socket,
  the result pipe's write end, the lifeline's read end, the stdio/extra fds the
  child gets, then the view helper's user and mount namespace fds if any;
* on the status socket the launcher answers ``P<pid>`` with the keeper's pidfd (or
  ``E<message>`` if fork failed), and ``W<wait status>`` once it reaped the keeper.

The lifeline works as on the direct path: only the owner holds its write end, so
when the owner dies (even by SIGKILL) every keeper kills its sandbox. The launcher
exits when its control socket reaches EOF, i.e. when its owner closes it or dies.
"""

from __future__ import annotations

import array
import contextlib
import gc
import os
import pickle
import select
import socket
import struct
from typing import Any, NoReturn

from branching_core.sandbox import _spawn
from branching_core.sandbox._command_init import command_main

HEADER = struct.Struct("<II")
MAX_FDS = 250  # under the kernel's SCM_MAX_FD (253)


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_request(ctrl: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The next request and its fds; None at EOF (the owner is gone)."""
    header, fds, _flags, _addr = socket.recv_fds(ctrl, HEADER.size, MAX_FDS)
    if not header:
        return None
    if len(header) < HEADER.size:
        rest = _recv_exact(ctrl, HEADER.size - len(header))
        if rest is None:
            return None
        header += rest
    size, _count = HEADER.unpack(header)
    payload = _recv_exact(ctrl, size)
    if payload is None:
        for fd in fds:
            os.close(fd)
        return None
    return pickle.loads(payload), fds


def _send(sock: socket.socket, data: bytes, fds: list[int] | None = None) -> None:
    with contextlib.suppress(OSError):  # the owner may have given up on this request
        if fds:
            sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            sock.send(data)


class _Server:
    def __init__(self, ctrl_fd: int) -> None:
        self.ctrl = socket.socket(fileno=ctrl_fd)
        self.poller = select.poll()
        self.poller.register(self.ctrl, select.POLLIN)
        self.keepers: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, status)

    def start(self, request: dict[str, Any], fds: list[int]) -> None:
        status = socket.socket(fileno=fds[0])
        res_w, life_r = fds[1], fds[2]
        targets: list[int] = request["targets"]
        sources = fds[3:3 + len(targets)]
        plan = request["plan"]
        extra = fds[3 + len(targets):]
        if request["userns"]:
            plan.userns_fd = extra.pop(0)
        if request["mntns"]:
            plan.mntns_fd = extra.pop(0)
        passed = fds[1:]
        try:
            pid = os.fork()
        except OSError as exc:
            _send(status, b"E" + f"fork() failed: {exc.strerror}".encode())
            status.close()
            for fd in passed:
                os.close(fd)
            return
        if pid == 0:  # pragma: no cover - runs in the keeper
            try:  # close_fds=True: the keeper drops every fd of ours it inherited
                _spawn._keeper(
                    plan, request["cgroup_procs"], dict(zip(targets, sources, strict=True)),
                    res_w, life_r, True, command_main(request["argv"], request["env"]),
                )
            finally:
                os._exit(127)
        for fd in passed:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        _send(status, b"P" + struct.pack("<i", pid), [pidfd])
        self.keepers[pidfd] = (pid, status)
        self.poller.register(pidfd, select.POLLIN)

    def reap(self, pidfd: int) -> None:
        pid, status = self.keepers.pop(pidfd)
        self.poller.unregister(pidfd)
        _, wait_status = os.waitpid(pid, 0)
        os.close(pidfd)
        _send(status, b"W" + struct.pack("<i", wait_status))
        status.close()

    def serve(self) -> None:
        _send(self.ctrl, b"R")
        ctrl_fd = self.ctrl.fileno()
        while True:
            try:
                events = self.poller.poll()
            except InterruptedError:
                continue
            for fd, _ev in events:
                if fd != ctrl_fd:
                    self.reap(fd)
                    continue
                try:
                    got = _read_request(self.ctrl)
                except (OSError, pickle.UnpicklingError, EOFError, ValueError):
                    got = None
                if got is None:
                    return
                self.start(*got)


def serve(ctrl_fd: int) -> NoReturn:
    """Entry point of the launcher process (never returns)."""
    # No signal disposition is changed here: keepers inherit them (and SIG_IGN would
    # survive into the command). The owner starts us in a session of our own, so its
    # terminal's ^C and hangup do not reach us.
    # Everything imported so far is permanent: freezing it keeps the collector from
    # walking (and so copying, page by page) the inherited heap in every keeper.
    gc.collect()
    gc.freeze()
    try:
        _Server(ctrl_fd).serve()
    finally:
        os._exit(0)


__all__ = ["HEADER", "MAX_FDS", "serve"]
