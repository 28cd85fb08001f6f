"""The same over streamable HTTP: ``forkdeck mcp --http 127.0.0.1:PORT``."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.mcp.conftest import (
    call,
    helper_pid,
    http_server,
    http_session,
    leftovers,
    pid_gone,
    processes_with,
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
