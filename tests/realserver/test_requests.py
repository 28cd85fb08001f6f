"""What forkdeck actually sends a server (issue 14 item 11): captured at the scripted server."""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core.agent.toolset import INSTRUCTIONS
from branching_core.fork import BranchSpec
from tests.realserver.helpers import prepared, turn, write_config
from tests.support.openai_server import ScriptedServer


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def system_messages(request: dict) -> list[str]:
    return [
        m["content"] if isinstance(m["content"], str) else str(m["content"])
        for m in request["messages"]
        if m["role"] in ("system", "developer")
    ]


async def test_workspace_instructions_are_sent_once(root: Path, server: ScriptedServer) -> None:
    """The TUI agent used to carry the workspace instructions as its own instructions *and*
    get them from the workspace toolset: two identical system messages per request."""
    write_config(root, f'[model]\ndefault = "scripted-model"\nbase_url = "{server.url}"\n')
    session = await prepared(root, env={})
    await turn(session, "hi")
    (request,) = server.chat_requests
    systems = system_messages(request)
    assert len(systems) == 1, systems
    assert systems[0].count(INSTRUCTIONS) == 1
    assert request["messages"][-1] == {"role": "user", "content": "hi"}

    coordinator = await session.start_fork([BranchSpec("a", "go")], None)
    await coordinator.wait(timeout=30)
    branch_request = server.chat_requests[-1]
    assert [s.count(INSTRUCTIONS) for s in system_messages(branch_request)] == [1]
    await session.abort_fork()


async def test_parent_turn_records_estimated_usage(root: Path, server: ScriptedServer) -> None:
    """A parent turn on a server without usage chunks counts estimated tokens, not 0."""
    from tests.support.openai_server import Reply

    server.default = Reply.text("Four", " words", " right", " here", usage=False)
    write_config(root, f'[model]\ndefault = "scripted-model"\nbase_url = "{server.url}"\n')
    session = await prepared(root, env={})
    await turn(session, "hi")
    assert session.totals.output_tokens > 0 and session.totals.input_tokens > 0
    assert session.totals.tokens_estimated
    from forkdeck.chat.status_bar import StatusInfo, format_status

    line = format_status(StatusInfo("m", "copy", 0.0, 10, 4, tokens_estimated=True))
    assert "tokens ~10 in / ~4 out" in line


async def test_a_failed_chat_turn_is_one_readable_line(root: Path, server: ScriptedServer) -> None:
    """What the chat screen shows for a failed turn (``describe_error``): status, server,
    the start of the body, on one line, however large the body."""
    from branching_core.agent.model_errors import describe_error
    from tests.support.openai_server import Reply

    server.push(*[Reply.error(500, '{"error": {"message": "' + "x" * 5000 + '"}}')] * 3)
    write_config(root, f'[model]\ndefault = "scripted-model"\nbase_url = "{server.url}"\n')
    session = await prepared(root, env={})
    with pytest.raises(Exception) as info:
        await turn(session, "hi")
    line = describe_error(info.value, session.model, session.history)
    assert "\n" not in line and len(line) <= 300
    assert line.startswith(f"the server at {server.url} failed with an internal error")
