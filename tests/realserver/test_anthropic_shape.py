"""The same checks in Anthropic's Messages API shape (``POST /v1/messages``): a hosted provider
reached by its env key (here pointed at the scripted server with ``ANTHROPIC_BASE_URL``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core.agent import is_offline
from branching_core.fork import BranchSpec
from tests.realserver.helpers import prepared, turn
from tests.support.openai_server import Reply, ScriptedServer


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    return ws


@pytest.fixture
def anthropic_env(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    base = server.url.removesuffix("/v1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", base)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    return {"ANTHROPIC_API_KEY": "sk-ant-test-dummy"}


async def test_anthropic_chat_turn_streams_from_the_messages_api(
    root: Path, server: ScriptedServer, anthropic_env: dict[str, str]
) -> None:
    session = await prepared(root, requested_model="anthropic:claude-haiku-5-5", env=anthropic_env)
    assert not is_offline(session.model), session.notices
    output, sink = await turn(session, "hi")
    assert output == "Hello from the server." and "".join(sink.text) == output
    request = server.requests[-1]
    assert request["model"] == "claude-haiku-5-5" and request["max_tokens"] == 4096
    assert session.totals.input_tokens == 11


async def test_anthropic_branches_tool_call_and_a_readable_error(
    root: Path, server: ScriptedServer, anthropic_env: dict[str, str]
) -> None:
    session = await prepared(root, requested_model="anthropic:claude-haiku-5-5", env=anthropic_env)
    body = '{"type": "error", "error": {"type": "overloaded_error", "message": "' + "busy " * 500
    body += '"}}'


    def script(req: dict) -> Reply:  # by content, so the branches' order does not matter
        said = str(req["messages"])
        if "fail" in said:
            return Reply.error(529, body)
        if "tool_result" not in said:
            return Reply.tool("read_file", path="a.txt")
        return Reply.text("Done.")

    server.handler = script
    coordinator = await session.start_fork(
        [BranchSpec("ok", "read it"), BranchSpec("bad", "fail please")], None
    )
    statuses = {s.label: s for s in await coordinator.wait(timeout=60)}
    assert statuses["ok"].state == "done", statuses["ok"].error
    assert statuses["ok"].tool_calls == 1
    error = statuses["bad"].error or ""
    assert statuses["bad"].state == "failed" and "\n" not in error and len(error) <= 300
    assert "529" in error and server.url.removesuffix("/v1") in error
    await session.abort_fork()
