"""The same over streamable HTTP: ``forkdeck mcp --http 127.0.0.1:PORT``."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.mcp.conftest import (
    REPO,
    SERVER,
    call,
    helper_pid,
    http_server,
    http_session,
    leftovers,
    pid_gone,
    processes_with,
    server_env,
    snapshot,
    wait_until,
)
from tests.mcp.test_stdio import TOOLS, two_branches_first_wins


async def test_two_branches_first_winner_over_http(ws: Path) -> None:
    with http_server(ws) as (proc, url):
        async with http_session(url) as session:
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS
            await two_branches_first_wins(session, ws)
        assert proc.poll() is None, "the server must keep serving other clients"
    assert wait_until(lambda: leftovers(ws) == []), leftovers(ws)


async def test_session_end_aborts_only_that_sessions_branches(ws: Path) -> None:
    before = snapshot(ws)
    marker = "5432.876"
    with http_server(ws) as (proc, url):
        async with http_session(url) as other:
            survivor = await call(other, "branch_create", name="other")
            async with http_session(url) as session:
                gone = await call(session, "branch_create", name="mine")
                Path(gone["path"], "x.txt").write_text("x")
                await call(session, "branch_run", label="mine",
                           command=f"(sleep {marker} &); true")
            # the client closed its session (DELETE): its branch is aborted at once
            assert wait_until(lambda: not Path(gone["path"]).exists())
            assert wait_until(lambda: processes_with(marker) == [])
            labels = [b["label"] for b in (await call(other, "branch_list"))["branches"]]
            assert labels == ["other"]
            assert Path(survivor["path"]).is_dir()
        helper = helper_pid(survivor["path"])
        # SIGTERM of the server: everything goes
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert wait_until(lambda: pid_gone(helper))
    assert leftovers(ws) == []
    assert snapshot(ws) == before


async def test_a_session_that_goes_silent_is_ended_after_the_idle_timeout(ws: Path) -> None:
    """A client that vanishes without its goodbye (no DELETE) loses its branches once the
    session has been idle for ``--idle-timeout``; kept branches stay."""
    with http_server(ws, "--idle-timeout", "1") as (proc, url):
        async with streamable_http_client(url, terminate_on_close=False) as streams, \
                ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            gone = await call(session, "branch_create", name="forgotten")
            kept = await call(session, "branch_create", name="kept", keep=True)
        assert wait_until(lambda: not Path(gone["path"]).exists(), timeout=30)
        assert Path(kept["path"]).is_dir()
        async with http_session(url) as session:
            labels = [b["label"] for b in (await call(session, "branch_list"))["branches"]]
            assert labels == ["kept"]
            await call(session, "branch_abort", label="kept")
        assert proc.poll() is None
    assert wait_until(lambda: leftovers(ws) == []), leftovers(ws)


def test_a_port_in_use_is_one_clear_error(ws: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([*SERVER, str(ws), "--http", str(port)], env=server_env(),
                              cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert f"error: RuntimeError: cannot serve HTTP on 127.0.0.1:{port}" in proc.stderr
    assert leftovers(ws) == []


async def test_a_token_guards_the_http_server(ws: Path) -> None:
    """With $FORKDECK_MCP_TOKEN set, requests without the bearer token get 401 and
    change nothing; with it, the tools work."""
    before = snapshot(ws)
    with http_server(ws, env={"FORKDECK_MCP_TOKEN": "s3cret"}) as (proc, url):
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            async with create_mcp_http_client(headers=headers) as client:
                answer = await client.post(url, json={
                    "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "intruder", "version": "0"}}},
                    headers={"Accept": "application/json, text/event-stream"})
            assert answer.status_code == 401
        async with http_session(url, token="s3cret") as session:
            made = await call(session, "branch_create", name="ok")
            await call(session, "branch_abort", label=made["label"])
        assert proc.poll() is None
    assert snapshot(ws) == before
