"""Services per branch: a long-running command (dev server, database) in a branch's sandbox.

A ``Service`` is a ``SandboxedCommand`` that joins the branch's network namespace and
sees the branch's view, so the branch's own commands reach it at ``localhost:PORT`` and
its files (a SQLite file, a PostgreSQL data directory) are forked with the branch. It
keeps running across the branch's commands and model turns and is stopped by its
``BranchNetwork`` when the branch closes: first ``stop_signal`` (a database flushes its
data), then after ``stop_timeout`` the whole sandbox tree is killed. Being a sandbox, it
also dies with forkdeck, even by SIGKILL (the sandbox's lifeline).

Its output is kept as a bounded log (the last ``LOG_LINES`` lines) for ``/services``.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from branching_core.errors import BranchingError, InvalidArgumentError
from branching_core.sandbox.command import SandboxedCommand
from branching_core.sandbox.limits import ResourceLimits
from branching_core.sandbox.network import NetworkArg

if TYPE_CHECKING:
    from branching_core.config.schema import ServiceConfig

LOG_LINES = 400
LOG_LINE_CHARS = 2000
READY_PROBES = ("tcp", "http", "none")


class ServiceError(BranchingError):
    """A service could not start, or never became ready (the message holds its log tail)."""


@dataclass(frozen=True)
class ServiceSpec:
    """What ``[services.<name>]`` declares.

    ``ready``: ``"tcp"`` (the port accepts a connection), ``"http"`` or ``"http:/path"``
    (an HTTP answer below 500), or ``"none"`` (started is ready). ``autostart``: start it
    when the branch's network is made, not on first use.
    """

    name: str
    command: str
    port: int | None = None
    ready: str = "tcp"
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    autostart: bool = False
    stop_signal: str = "TERM"
    stop_timeout: float = 10.0
    ready_timeout: float = 60.0

    def __post_init__(self) -> None:
        if not self.command.strip():
            raise InvalidArgumentError(f"service {self.name!r}: command must not be empty")
        if self.port is not None and not 0 < self.port < 65536:
            raise InvalidArgumentError(
                f"service {self.name!r}: port must be 1-65535, got {self.port}"
            )
        kind = self.ready.split(":", 1)[0]
        if kind not in READY_PROBES:
            raise InvalidArgumentError(f"service {self.name!r}: ready must be tcp, http, "
                                       f"http:/path or none, got {self.ready!r}")
        if kind != "none" and self.port is None:
            raise InvalidArgumentError(
                f"service {self.name!r}: a {kind} readiness probe needs a port"
            )
        signal_number(self.stop_signal)

    @classmethod
    def from_config(cls, name: str, cfg: ServiceConfig) -> ServiceSpec:
        """From the settings' ``ServiceConfig``."""
        return cls(name=name, command=cfg.command, port=cfg.port, ready=cfg.ready,
                   env=dict(cfg.env), autostart=cfg.autostart, stop_signal=cfg.stop_signal,
                   stop_timeout=cfg.stop_timeout, ready_timeout=cfg.ready_timeout)


def signal_number(name: str) -> int:
    """``TERM``/``SIGINT``/``2`` -> the signal number; ValueError for anything else."""
    text = name.strip().upper()
    if text.isdigit():
        return int(text)
    try:
        return int(signal.Signals[text if text.startswith("SIG") else "SIG" + text])
    except KeyError:
        raise InvalidArgumentError(f"unknown stop signal {name!r}") from None


class ServiceLog:
    """The last ``LOG_LINES`` lines of a service's output (thread-safe)."""

    def __init__(self, limit: int = LOG_LINES) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=limit)
        self.dropped = 0
        self._lock = threading.Lock()

    def add(self, stream: str, line: str) -> None:
        text = line if len(line) <= LOG_LINE_CHARS else line[:LOG_LINE_CHARS] + " [...]"
        with self._lock:
            if len(self.lines) == self.lines.maxlen:
                self.dropped += 1
            self.lines.append(text if stream == "stdout" else f"! {text}")

    def tail(self, n: int = 20) -> list[str]:
        with self._lock:
            return list(self.lines)[-n:]


def _children(pid: int) -> list[int]:
    """``pid``'s children (read from /proc; empty when it is gone)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(k) for k in f.read().split())
        except OSError:
            continue
    return out


SocketFactory = Callable[[socket.AddressFamily], socket.socket]


def probe(make_socket: SocketFactory, port: int, ready: str, timeout: float = 1.0) -> bool:
    """One readiness check of ``127.0.0.1:port`` (or ``[::1]:port``) inside the branch
    (see ``ServiceSpec``)."""
    kind, _, path = ready.partition(":")
    if kind == "none":
        return True
    return any(_probe_one(make_socket, family, address, port, kind, path, timeout)
               for family, address in ((socket.AF_INET, "127.0.0.1"),
                                       (socket.AF_INET6, "::1")))


def _probe_one(make_socket: SocketFactory, family: socket.AddressFamily, address: str,
               port: int, kind: str, path: str, timeout: float) -> bool:
    sock = make_socket(family)
    try:
        sock.settimeout(timeout)
        sock.connect((address, port))
        if kind == "tcp":
            return True
        sock.sendall(f"GET {path or '/'} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
        head = sock.recv(64)
        parts = head.split()
        return len(parts) > 1 and head.startswith(b"HTTP/") and parts[1].isdigit() \
            and int(parts[1]) < 500
    except OSError:
        return False
    finally:
        sock.close()


class Service:
    """A running service of one branch (made by ``BranchNetwork.start_service``)."""

    def __init__(self, spec: ServiceSpec, workspace: str | os.PathLike[str], *,
                 network: NetworkArg, make_socket: SocketFactory | None,
                 mount_at: str | os.PathLike[str] | None = None,
                 limits: ResourceLimits | None = None) -> None:
        self.spec = spec
        self.log = ServiceLog()
        self.started_at = time.time()
        self.ready = False
        self._make_socket = make_socket
        env = dict(os.environ)
        env.update(spec.env)
        if spec.port is not None:
            env.setdefault("PORT", str(spec.port))
        self.proc = SandboxedCommand(spec.command, workspace, network=network, env=env,
                                     mount_at=mount_at, limits=limits,
                                     on_output=self.log.add, max_output=1 << 16)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def alive(self) -> bool:
        return self.proc.alive

    @property
    def status(self) -> str:
        if not self.proc.alive:
            code = self.proc.exit_code
            return f"exited ({code})" if code is not None else "stopped"
        return "ready" if self.ready else "starting"

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the probe passes; raises ``ServiceError`` (with the log tail) if
        the service exits first or ``timeout`` (default ``ready_timeout``) passes."""
        spec = self.spec
        limit = spec.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        delay = 0.01
        while True:
            if not self.proc.alive:
                raise ServiceError(self._why(f"exited with code {self.proc.exit_code} before "
                                             "it was ready"))
            make = self._make_socket
            if spec.port is None or spec.ready == "none" or (
                    make is not None and probe(make, spec.port, spec.ready)):
                self.ready = True
                return
            if time.monotonic() > deadline:
                self.stop()
                raise ServiceError(self._why(f"not ready on port {spec.port} ({spec.ready}) "
                                             f"within {limit:g} s; stopped"))
            time.sleep(delay)
            delay = min(delay * 1.5, 0.2)

    def _why(self, what: str) -> str:
        tail = "\n".join(self.log.tail(10))
        return f"service {self.name!r} {what}" + (f"; its last output:\n{tail}" if tail else "")

    def stop(self, timeout: float | None = None) -> None:
        """``stop_signal`` to the service's processes, then kill the whole sandbox after
        ``timeout`` (default ``stop_timeout``). Idempotent."""
        if self.proc.alive:
            limit = self.spec.stop_timeout if timeout is None else timeout
            kids = _children(self.proc.pid)
            # the keeper's child is the sandbox's init; the init's children are the
            # service's command (``exec`` in a shell command line lets it get the signal)
            targets = _children(kids[0]) if kids else []
            sig = signal_number(self.spec.stop_signal)
            for pid in targets:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
            if targets:
                with contextlib.suppress(Exception):  # TimeoutError: wait killed the tree
                    self.proc.wait(limit)
        self.proc.abort()
        self.ready = False


__all__ = ["LOG_LINES", "Service", "ServiceError", "ServiceLog", "ServiceSpec", "probe",
           "signal_number"]
