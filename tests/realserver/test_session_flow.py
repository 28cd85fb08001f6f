"""One whole session on the scripted server, as issue 14 ran it on llama-cpp-python: a chat
turn, a fork of 3 with per-branch models on that server, a steer, one branch writing a file
through a tool call, a user price budget, a merge; then the chat continues from the winner."""

from __future__ import annotations

import asyncio
from pathlib import Path

from branching_core.fork import BranchSpec
from tests.realserver.helpers import prepared, turn, write_config
from tests.support.openai_server import Reply, ScriptedServer


def _said(request: dict) -> str:
    return str(request["messages"])


async def test_chat_fork_steer_budget_merge(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("old\n")

    def script(request: dict) -> Reply:
        said = _said(request)
        if request["model"] == "writer" and "tool" not in [m["role"] for m in request["messages"]]:
            return Reply.tool("write_file", path="notes.txt", content="new\n")
        if request["model"] == "slow" and "be brief" not in said:
            return Reply("text", ["waiting "] * 100, delay=0.02)  # until it is steered
        if "be brief" in said:
            return Reply.text("Brief.")
        return Reply.text("Done.")

    with ScriptedServer(models=("chat", "writer", "slow", "pricey"), single_slot=True) as srv:
        srv.handler = script
        write_config(
            root,
            f'[model]\ndefault = "chat"\nbase_url = "{srv.url}"\nmax_concurrent_requests = 1\n'
            '[fork.models]\n1 = "openai:writer"\n2 = "openai-compatible:slow"\n'
            '3 = "openai-compatible:pricey"\n'
            '[fork.prices]\n"pricey" = {input = 1000.0, output = 1000.0}\n',
        )
        session = await prepared(root, env={})
        output, _ = await turn(session, "hello")
        assert output == "Done."
        settings = session.settings
        specs = [
            BranchSpec("writer", "rewrite notes", model=settings.model_for_branch(1)),
            BranchSpec("slow", "think long", model=settings.model_for_branch(2)),
            BranchSpec("pricey", "go", model=settings.model_for_branch(3), budget_usd=0.001),
        ]
        coordinator = await session.start_fork(specs, None)
        for _ in range(500):  # the slow branch's first response is streaming
            if any(r["model"] == "slow" for r in srv.chat_requests):
                break
            await asyncio.sleep(0.01)
        coordinator.steer("slow", "be brief")
        statuses = {s.label: s for s in await coordinator.wait(timeout=60)}
        assert statuses["writer"].state == "done", statuses["writer"].error
        assert statuses["slow"].state == "done", statuses["slow"].error
        assert statuses["slow"].output == "Brief."
        assert statuses["pricey"].state == "budget_exhausted", statuses["pricey"].error
        assert srv.max_in_flight == 1
        assert (root / "notes.txt").read_text() == "old\n"  # nothing merged yet

        result = await session.merge("pick:writer")
        assert result.winner_label == "writer" and not result.aborted
        assert (root / "notes.txt").read_text() == "new\n"
        await turn(session, "and now?")
        last = srv.chat_requests[-1]
        assert last["model"] == "chat" and "rewrite notes" in _said(last)
