"""Small helpers shared by the real-server tests: a workspace with a config, a turn recorder."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from forkdeck.session import ChatSession


def write_config(root: Path, text: str) -> Path:
    path = root / ".pydantic-deep" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class Recorder:
    """A ``TurnSink`` that keeps what a parent turn streamed."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.tools: list[tuple[str, Any]] = []

    def on_text(self, delta: str) -> None:
        self.text.append(delta)

    def on_tool_call(self, tool_call_id: str, tool_name: str, args: Any) -> None:
        self.tools.append((tool_name, args))

    def on_tool_result(self, tool_call_id: str, tool_name: str, content: str, ok: bool) -> None:
        return None


async def prepared(root: Path, **kwargs: Any) -> ChatSession:
    """A ``ChatSession`` on ``root`` after its start-up (run in a thread, as the TUI does)."""
    session = ChatSession(root, backend="copy", **kwargs)
    await asyncio.to_thread(session.prepare)
    return session


async def turn(session: ChatSession, prompt: str) -> tuple[str | None, Recorder]:
    sink = Recorder()
    output = await session.run_turn(prompt, sink)
    return output, sink
