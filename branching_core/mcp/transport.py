"""Running the server: stdio or streamable HTTP, session ends, and exit on a signal.

Why here and not in the SDK's ``run()``: branches must be aborted when their client goes
away and when the server is told to stop, even while worker threads are blocked in
sandboxed commands (which the event loop cannot cancel). So:

- stdio: the session ends when stdin closes; ``serve`` then aborts every branch not kept.
- HTTP: an ASGI wrapper watches each ``Mcp-Session-Id``: a ``DELETE`` (the client's
  goodbye) or no request for ``idle_timeout_s`` ends that session's branches (the SDK's
  own idle timeout is set to the same value, so the session is gone there too).
- SIGTERM/SIGINT: a thread kills running commands, aborts branches (kept ones are only
  unmounted), waits for their directories to go (``close_all_workspaces``), and exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import logging
import os
import select
import signal
import sys
import threading
import time
from collections import defaultdict
from typing import Any

import anyio

from branching_core import close_all_workspaces
from branching_core.errors import OperationError
from branching_core.mcp.server import SESSION_HEADER, STDIO_OWNER, build_server
from branching_core.mcp.tools import ForkdeckTools

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_S = 20.0


TOKEN_ENV = "FORKDECK_MCP_TOKEN"


class SessionWatch:
    """ASGI middleware: ends a session's branches on DELETE or after it idles, and, when
    ``token`` is set, refuses requests without ``Authorization: Bearer <token>`` (any
    local process can reach a port; ``branch_run`` runs commands as this user)."""

    def __init__(self, app: Any, tools: ForkdeckTools, idle_timeout_s: float,
                 token: str | None = None) -> None:
        self.app = app
        self.tools = tools
        self.idle_timeout_s = idle_timeout_s
        self.token = token
        self.last_seen: dict[str, float] = {}
        self.in_flight: defaultdict[str, int] = defaultdict(int)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        session = None
        authorization = ""
        for key, value in scope.get("headers") or ():
            name = key.decode("latin-1").lower()
            if name == SESSION_HEADER:
                session = value.decode("latin-1")
            elif name == "authorization":
                authorization = value.decode("latin-1")
        if self.token is not None and not hmac.compare_digest(
                authorization.encode(), f"Bearer {self.token}".encode()):
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body",
                        "body": f"forkdeck mcp: missing or wrong bearer token (${TOKEN_ENV})\n"
                        .encode()})
            return
        if session is None:
            await self.app(scope, receive, send)
            return
        self.in_flight[session] += 1
        self.last_seen[session] = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight[session] -= 1
            self.last_seen[session] = time.monotonic()
            if scope.get("method") == "DELETE":
                await self._end(session)

    async def _end(self, session: str) -> None:
        self.last_seen.pop(session, None)
        self.in_flight.pop(session, None)
        await anyio.to_thread.run_sync(self.tools.book.end_owner, f"http:{session}")

    async def watch_idle(self) -> None:
        while True:
            await anyio.sleep(min(5.0, self.idle_timeout_s / 2))
            now = time.monotonic()
            for session, seen in list(self.last_seen.items()):
                if self.in_flight.get(session, 0) == 0 and now - seen > self.idle_timeout_s:
                    log.info("session %s idle for %.0f s: aborting its branches", session,
                             now - seen)
                    await self._end(session)


def _install_signal_exit(tools: ForkdeckTools) -> None:
    """On SIGTERM/SIGINT: clean up from a thread (the main thread may be the event loop,
    worker threads may hold locks) and leave with 128 + signal."""
    started = threading.Event()

    def shutdown(signum: int) -> None:
        timer = threading.Timer(SHUTDOWN_GRACE_S, os._exit, args=(128 + signum,))
        timer.daemon = True
        timer.start()
        try:
            tools.close()
            close_all_workspaces(SHUTDOWN_GRACE_S / 2)
        except Exception:
            log.exception("cleanup on signal failed")
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os._exit(128 + signum)

    def handler(signum: int, _frame: object) -> None:
        if started.is_set():
            return
        started.set()
        threading.Thread(target=shutdown, args=(signum,), name="forkdeck-mcp-exit",
                         daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, handler)


def _watch_stdin_hangup(tools: ForkdeckTools, done: threading.Event, fd: int) -> None:
    """Kill running commands as soon as the client closes its end of stdin.

    The SDK notices the end of input only when the event loop can finish, and it waits
    for worker threads, which may be blocked in a long ``branch_run``: nobody is left to
    read that result, so the command is killed and the server exits promptly. ``poll``
    reports the hang-up without consuming input the SDK has yet to read. ``fd`` is a
    duplicate of the client's stdin taken before the SDK starts (it moves the wire off fd 0
    and points fd 0 at /dev/null, so children cannot read the protocol).
    """
    poller = select.poll()
    poller.register(fd, select.POLLHUP)
    while not done.is_set():
        events = poller.poll(500)
        if any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL)
               for _fd, mask in events):
            while not done.wait(0.2):  # until the loop ends; later runs are refused
                tools.book.kill_running()
            return


def serve_stdio(tools: ForkdeckTools) -> None:
    """Serve one client on stdin/stdout until it closes stdin; then abort its branches."""
    server = build_server(tools)
    _install_signal_exit(tools)
    done = threading.Event()
    with contextlib.suppress(OSError):
        watched = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        threading.Thread(target=_watch_stdin_hangup, args=(tools, done, watched),
                         daemon=True, name="forkdeck-mcp-stdin").start()
    try:
        anyio.run(server.run_stdio_async)
    finally:
        done.set()
        tools.book.end_owner(STDIO_OWNER)
        tools.close()
        # ``watched`` stays open until exit (close-on-exec): closing it under the
        # watcher's poll could hand its number to another file meanwhile.


def serve_http(tools: ForkdeckTools, host: str, port: int, idle_timeout_s: float) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until a signal stops it."""
    import uvicorn

    server = build_server(tools)
    app = server.streamable_http_app(session_idle_timeout=idle_timeout_s, host=host)
    watch = SessionWatch(app, tools, idle_timeout_s, os.environ.get(TOKEN_ENV) or None)
    config = uvicorn.Config(watch, host=host, port=port, log_level="warning",
                            lifespan="on")
    web = uvicorn.Server(config)
    stopped = threading.Event()

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(watch.watch_idle)
            try:
                await web.serve()
            except SystemExit:
                pass  # uvicorn could not start (it logged why); serve_http reports it
            group.cancel_scope.cancel()

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException:
            log.exception("HTTP server stopped")
        finally:
            stopped.set()

    # uvicorn installs its own signal handlers only in the main thread; here it runs in
    # another so SIGTERM reaches ours (which cleans up even with tool threads blocked).
    _install_signal_exit(tools)
    thread = threading.Thread(target=run, name="forkdeck-mcp-http", daemon=True)
    thread.start()
    while not web.started and not stopped.is_set():
        time.sleep(0.02)
    if not web.started:
        tools.close()
        raise OperationError(f"cannot serve HTTP on {host}:{port} (address in use or not "
                             "available here)")
    guard = f"bearer token from ${TOKEN_ENV}" if watch.token else f"no token (set ${TOKEN_ENV})"
    print(f"forkdeck mcp: serving {tools.ws.path} at http://{host}:{port}/mcp ({guard})",
          file=sys.stderr, flush=True)
    try:
        while not stopped.wait(0.5):
            pass
    finally:
        tools.close()


__all__ = ["TOKEN_ENV", "SessionWatch", "serve_http", "serve_stdio"]
