"""Server exit: SIGTERM and SIGKILL leave nothing; ``keep=true`` branches survive, are
listed by ``forkdeck status``, and a later server commits or aborts them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from branching_core import Workspace
from tests.mcp.conftest import (
    REPO,
    SERVER,
    async_wait_until,
    call,
    call_error,
    helper_pid,
    http_server,
    http_session,
    leftovers,
    mounts_under,
    pid_gone,
    processes_with,
    server_env,
    snapshot,
    stdio_session,
    store_of,
    wait_until,
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
async def test_killed_server_leaves_nothing(ws: Path, sig: signal.Signals) -> None:
    before = snapshot(ws)
    marker = f"6543.{int(sig)}"
    helper: int | None = None
    started = False
    code: int | None = None
    with http_server(ws) as (proc, url):
        try:
            async with http_session(url) as session:
                opened = await call(session, "branch_create", name="open")
                Path(opened["path"], "wip.txt").write_text("wip")
                await call(session, "branch_run", label="open",
                           command=f"(sleep {marker} &); true")
                helper = helper_pid(opened["path"])
                # a command still running (a worker thread blocked in it) at the signal
                running = asyncio.create_task(session.call_tool(
                    "branch_run", {"label": "open", "command": f"sleep {marker}9"}))
                started = await async_wait_until(lambda: processes_with(f"{marker}9") != [])
                proc.send_signal(sig)
                code = await asyncio.to_thread(proc.wait, 60)
                running.cancel()
        except* Exception:
            pass  # the session's transport fails with its server: expected here
    # (asserted out here: an assertion inside would be taken for the transport's failure)
    assert helper is not None and started, "the long command never started"
    assert code == (-sig if sig == signal.SIGKILL else 128 + sig)
    assert wait_until(lambda: pid_gone(helper)), "mount helper left behind"
    assert wait_until(lambda: processes_with(marker) == []), processes_with(marker)
    assert mounts_under(store_of(ws)) == []
    if sig == signal.SIGTERM:
        assert leftovers(ws) == []  # cleaned up before exiting
    Workspace(ws)  # a SIGKILLed owner's directories are swept at the next open
    assert leftovers(ws) == [] or leftovers(ws) == ["sessions"]
    assert snapshot(ws) == before


def _server_pid(ws: Path) -> int:
    """The ``forkdeck mcp`` child of this test serving ``ws``."""
    for pid in processes_with(str(ws)):
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if int(stat[1]) == os.getpid() and b"branching_core.cli" in cmdline:
            return pid
    raise AssertionError("no forkdeck mcp child found")


async def test_sigterm_of_a_stdio_server_aborts_its_branches(ws: Path) -> None:
    before = snapshot(ws)
    pid = 0
    helper: int | None = None
    try:
        async with stdio_session(ws) as session:
            opened = await call(session, "branch_create", name="open")
            Path(opened["path"], "wip.txt").write_text("wip")
            helper = helper_pid(opened["path"])
            pid = _server_pid(ws)
            os.kill(pid, signal.SIGTERM)
            assert await async_wait_until(lambda: pid_gone(pid))
    except* Exception:
        pass  # the session fails with its server: expected
    assert pid and pid_gone(pid)
    assert wait_until(lambda: pid_gone(helper))
    assert leftovers(ws) == []  # cleaned up before exiting, no reopen needed
    assert snapshot(ws) == before


def _status(ws: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "branching_core.cli", "status", "-w", str(ws), "--json"],
        env=server_env(), cwd=REPO, capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


async def test_kept_branch_survives_and_a_later_server_commits_it(ws: Path) -> None:
    async with stdio_session(ws) as session:
        kept = await call(session, "branch_create", name="keeper", keep=True)
        inner = await call(session, "branch_create", name="inner", parent="keeper", keep=True)
        await call(session, "branch_create", name="temp")
        refused = await call_error(session, "branch_create", name="x", parent="temp", keep=True)
        assert "kept parent" in refused
        Path(kept["path"], "kept.txt").write_text("kept\n")
        Path(inner["path"], "inner.txt").write_text("inner\n")
    # the server is gone: "temp" went with it, the kept ones are on disk and listed
    status = _status(ws)
    names = {d["name"]: d for d in status["branch_details"]}  # type: ignore[union-attr]
    assert set(names) == {"keeper", "inner"}
    assert all(d["durable"] and not d["owner_alive"] for d in names.values())
    assert not (ws / "kept.txt").exists()

    async with stdio_session(ws) as session:
        rows = {r["label"]: r for r in (await call(session, "branch_list"))["branches"]}
        assert set(rows) == {"keeper", "inner"}
        assert rows["inner"]["parent"] == "keeper" and rows["keeper"]["keep"]
        assert Path(rows["keeper"]["path"], "kept.txt").read_text() == "kept\n"
        diff = await call(session, "branch_diff", label="keeper")
        assert [c["path"] for c in diff["changes"]] == ["kept.txt"]
        await call(session, "branch_abort", label="inner")
        landed = await call(session, "branch_commit", label="keeper")
        assert landed["created"] == ["kept.txt"]
    assert (ws / "kept.txt").read_text() == "kept\n"
    assert not (ws / "inner.txt").exists()
    assert _status(ws)["branches"] == []
    assert not list((ws / ".pydantic-deep" / "mcp").glob("*.json"))
    assert wait_until(lambda: leftovers(ws) == []), leftovers(ws)


def test_client_gone_during_a_long_run_the_server_exits_by_itself(ws: Path) -> None:
    """A client that closes stdin while ``branch_run`` is blocked in a long command: the
    command is killed and the server exits on its own (status 0, no signal needed)."""
    marker = "7654.321"
    proc = subprocess.Popen([*SERVER, str(ws)], env=server_env(), cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        def send(message: dict[str, object]) -> None:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            proc.stdin.flush()

        send({"id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/call",
              "params": {"name": "branch_create", "arguments": {"name": "long"}}})
        created = json.loads(proc.stdout.readline())
        assert not created["result"].get("isError"), created
        send({"id": 3, "method": "tools/call", "params": {
            "name": "branch_run", "arguments": {"label": "long", "command": f"sleep {marker}"}}})
        assert wait_until(lambda: processes_with(marker) != [])
        proc.stdin.close()  # the client is gone, its call still running
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert processes_with(marker) == []
    assert wait_until(lambda: leftovers(ws) == []), leftovers(ws)
