"""The real ``forkdeck`` TUI in tmux against the scripted server (issue 14: "the TUI through
tmux once"): started with ``--model openai-compatible:NAME@URL``, it chats with the server,
forks two branches that reach the same server, and quits cleanly. A second run with an
``openai:`` model and no key starts on the offline model and says why (it used to wedge)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.openai_server import Reply, ScriptedServer
from tests.support.tmux import Terminal, forkdeck_terminal

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@contextlib.contextmanager
def start(tmp_path: Path, *args: str) -> Iterator[Terminal]:
    with forkdeck_terminal(tmp_path, "models-e2e") as term:
        term.start(*args)
        yield term


@pytest.fixture
def tui_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(
        default=Reply.text("Hi", " from", " the", " scripted", " server."),
        single_slot=True,
        interrupt=True,
    ) as srv:
        yield srv


def test_tui_chats_and_forks_on_a_local_server(tmp_path: Path, tui_server: ScriptedServer) -> None:
    config = tmp_path / "workspace" / ".pydantic-deep" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[model]\nmax_concurrent_requests = 1\n")
    with start(tmp_path, "--model", f"openai-compatible:scripted-model@{tui_server.url}") as term:
        term.wait_for(lambda s: "scripted-model @" in s, "start-up on the server model")
        term.type("hello there")
        term.key("Enter")
        term.wait_for(lambda s: "Hi from the scripted server." in s, "the streamed reply")
        first = tui_server.chat_requests[0]
        assert first["model"] == "scripted-model"
        assert sum(m["role"] == "system" for m in first["messages"]) == 1
        screen = term.fork_two_rows("try one way", "try another")
        assert "a budget is a 200000-token cap" in screen  # which budget rule (item 7)
        term.wait_for(lambda s: "✓ " in s and s.count("✓") >= 2, "both branches done")
        assert len(tui_server.chat_requests) == 3 and tui_server.max_in_flight == 1
        term.type("/quit")
        term.key("Enter")
        term.wait_for(lambda s: "FORKDECK-EXIT=0" in s, "a clean exit")


def test_tui_without_a_key_starts_offline_and_says_why(tmp_path: Path) -> None:
    with start(tmp_path, "--model", "openai:gpt-6-luna") as term:
        screen = term.wait_for(lambda s: "offline (scripted, no LLM)" in s, "offline start-up")
        term.wait_for(lambda s: "OPENAI_API_KEY" in s, "the reason")
        term.type("ls")
        term.key("Enter")
        term.wait_for(lambda s: "README.txt" in s.split("ls", 1)[-1], "the offline model answering")
        assert "not ready" not in screen
        term.type("/quit")
        term.key("Enter")
        term.wait_for(lambda s: "FORKDECK-EXIT=0" in s, "a clean exit")
