"""Host forwards: a port on the host's 127.0.0.1 relayed to a port inside a branch.

Why a relay in this process rather than the stack's port mapping: pasta can publish a
port only when it starts, slirp4netns reaches only 10.0.2.100 (not a server bound to
127.0.0.1 inside), and a ``none`` namespace has no stack at all. The relay listens on
the host, and for each connection gets a socket made *inside* the branch's namespace
(``NetNamespace.socket``: the holder makes it, so this works for a normal user too)
and connects it to ``127.0.0.1:PORT`` there. One event loop thread serves every
forward of the process; a forward closes with its branch, and the whole relay ends
with the process (nothing to clean up after a SIGKILL: the listener is ours).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TypeVar

from branching_core.errors import InvalidArgumentError

T = TypeVar("T")

SocketFactory = Callable[[socket.AddressFamily], socket.socket]
_LOOPBACKS = ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1"))
_BUF = 1 << 16


@dataclass
class Forward:
    """An open host forward: ``http://127.0.0.1:{host_port}`` reaches ``port`` of ``branch``."""

    branch: str
    port: int
    host_port: int
    service: str | None = None
    closed: bool = False
    _server: asyncio.base_events.Server | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.host_port}"

    def label(self) -> str:
        """``b · web → http://127.0.0.1:41234`` (what the TUI and ``forkdeck ports`` show)."""
        what = self.service or str(self.port)
        return f"{self.branch} · {what} → {self.url}"

    def close(self) -> None:
        """Stop listening and drop the connections it relays (idempotent)."""
        if self.closed:
            return
        self.closed = True
        server = self._server
        if server is not None:
            _relay.call(_close_server, server)


async def _close_server(server: asyncio.base_events.Server) -> None:
    server.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(server.wait_closed(), 1.0)


class _Relay:
    """The one event loop thread serving every forward of this process."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, daemon=True,
                                 name="forkdeck-forwards").start()
                self.loop = loop
            return self.loop

    def call(self, fn: Callable[..., Coroutine[object, object, T]], *args: object) -> T:
        """Run coroutine function ``fn`` on the relay's loop; its result (10 s at most)."""
        loop = self._start()
        fut: Future[T] = asyncio.run_coroutine_threadsafe(fn(*args), loop)
        return fut.result(10)


_relay = _Relay()


def _new_relay_in_child() -> None:
    """A fork has no relay thread; the parent's forwards are not its to serve."""
    global _relay
    _relay = _Relay()


os.register_at_fork(after_in_child=_new_relay_in_child)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(_BUF)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def _serve(make_socket: SocketFactory, port: int, cr: asyncio.StreamReader,
                 cw: asyncio.StreamWriter, conns: set[asyncio.StreamWriter]) -> None:
    loop = asyncio.get_running_loop()
    inner: asyncio.StreamWriter | None = None
    try:
        sock = await _connect(loop, make_socket, port)
        ir, inner = await asyncio.open_connection(sock=sock)
        conns.update((cw, inner))
        await asyncio.gather(_pipe(cr, inner), _pipe(ir, cw))
    except (OSError, RuntimeError):
        pass
    finally:
        for w in (cw, inner):
            if w is not None:
                conns.discard(w)
                w.close()


async def _connect(loop: asyncio.AbstractEventLoop, make_socket: SocketFactory,
                   port: int) -> socket.socket:
    """A socket connected to the branch's ``127.0.0.1:port``, else its ``[::1]:port`` (a
    server that bound ``localhost`` may have taken the IPv6 loopback only)."""
    error: OSError | None = None
    for family, address in _LOOPBACKS:
        sock = await loop.run_in_executor(None, make_socket, family)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, (address, port))
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    assert error is not None
    raise error


async def _open(make_socket: SocketFactory, port: int, host_port: int
                ) -> asyncio.base_events.Server:
    conns: set[asyncio.StreamWriter] = set()

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _serve(make_socket, port, r, w, conns)

    server = await asyncio.start_server(handle, "127.0.0.1", host_port, reuse_address=True)
    real_close = server.close

    def close() -> None:  # the relayed connections end with the forward
        real_close()
        for w in list(conns):
            w.close()

    server.close = close
    return server


def open_forward(make_socket: SocketFactory, port: int, *, branch: str,
                 service: str | None = None, host_port: int = 0) -> Forward:
    """Listen on ``127.0.0.1:host_port`` (0: a free port) and relay each connection to
    the branch's ``127.0.0.1:port`` (else ``[::1]:port``) through sockets from
    ``make_socket(family)`` (made in the branch)."""
    if not 0 < port < 65536:
        raise InvalidArgumentError(f"port must be between 1 and 65535, got {port}")
    server = _relay.call(_open, make_socket, port, host_port)
    bound = server.sockets[0].getsockname()[1]
    return Forward(branch=branch, port=port, host_port=bound, service=service, _server=server)


__all__ = ["Forward", "open_forward"]
