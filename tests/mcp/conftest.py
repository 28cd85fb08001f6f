"""Fixtures for the MCP server tests: a seeded workspace, the server as a real
subprocess (stdio or streamable HTTP), and checks that nothing was left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from branching_core.workspace.store import default_store_root
from tests.workspace.treeutil import snapshot

REPO = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "branching_core.cli", "mcp"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("project\n")
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return root


def server_env() -> dict[str, str]:
    """The server inherits the test's isolated store (``FORKDECK_STORE``)."""
    return {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def stdio_params(ws: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=SERVER[0], args=[*SERVER[1:], str(ws), *extra],
                                 env=server_env(), cwd=str(REPO))


@contextlib.asynccontextmanager
async def stdio_session(ws: Path, *extra: str) -> AsyncIterator[ClientSession]:
    async with stdio_client(stdio_params(ws, *extra)) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def http_server(ws: Path, *extra: str, env: dict[str, str] | None = None,
                ) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``forkdeck mcp --http`` as a subprocess; yields it and its URL once it answers."""
    port = free_port()
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115  (not a pipe nobody drains: a full one blocks)
    proc = subprocess.Popen(
        [*SERVER, str(ws), "--http", f"127.0.0.1:{port}", *extra],
        env={**server_env(), **(env or {})}, cwd=REPO, stdout=subprocess.DEVNULL,
        stderr=log, text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(f"server exited: {log.read()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("HTTP server did not start") from None
                time.sleep(0.1)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    client = create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"} if token else None)
    async with client, streamable_http_client(url, http_client=client) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool call that must succeed; its structured result."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}({arguments}) failed: {result.content}"
    assert result.structured_content is not None
    return dict(result.structured_content)


async def call_error(session: ClientSession, tool: str, **arguments: Any) -> str:
    """A tool call that must fail with a tool error; its one line of text."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments}) unexpectedly succeeded: {result.content}"
    text = "".join(getattr(part, "text", "") for part in result.content)
    assert "\n" not in text.strip(), text
    return text


def store_of(ws: Path) -> Path:
    return default_store_root(ws.resolve())


def leftovers(ws: Path) -> list[str]:
    """What a branch of ``ws`` left in its store: branch, trash, spare, journal or session
    entries (the fixed layout of an idle store is not a leftover)."""
    root = store_of(ws)
    if not root.exists():
        return []
    fixed = {"commit.lock", "gen", "journal", "sessions", "spare", "trash", "workspace", "batches",
             "failed"}
    found = [p.name for p in root.iterdir() if p.name not in fixed]
    for sub in ("journal", "sessions", "spare", "trash", "failed", "batches"):
        if (root / sub).is_dir():
            found += [f"{sub}/{p.name}" for p in (root / sub).iterdir()]
    return sorted(found)


def helper_pid(path: str) -> int | None:
    """The mount helper whose namespace holds an overlay branch view (None otherwise)."""
    parts = Path(path).parts
    if len(parts) > 3 and parts[1] == "proc" and parts[3] == "root":
        return int(parts[2])
    return None


def processes_with(marker: str) -> list[int]:
    """Processes whose command line contains ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
    return pids


def wait_until(check: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return bool(check())


async def async_wait_until(check: Any, timeout: float = 30.0) -> bool:
    """``wait_until`` for a test whose event loop must keep serving its MCP session."""
    import anyio

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        await anyio.sleep(0.05)
    return bool(check())


def pid_gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def mounts_under(path: Path) -> list[str]:
    text = Path("/proc/self/mounts").read_text()
    return [line for line in text.splitlines() if str(path) in line]


__all__ = ["call", "call_error", "snapshot"]
