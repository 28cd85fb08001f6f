"""Footer hints say what Tab, Esc and ctrl+g do now, and change with focus and state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forkdeck.chat.screen import ChatScreen

from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    make_app,
    open_held_fork,
    ready,
)


def hints(chat: ChatScreen) -> dict[str, str]:
    """key -> description of what the footer shows."""
    return {
        key: active.binding.description
        for key, active in chat.active_bindings.items()
        if active.binding.show and active.binding.description
    }


async def test_hints_follow_the_focus_and_the_state(project: Path, gated: GatedModel) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat: Any = app.chat
        assert isinstance(chat, ChatScreen)
        shown = hints(chat)
        assert "escape" not in shown and "tab" not in shown and "ctrl+g" not in shown
        assert shown["ctrl+q"] == "Quit"
        await pilot.press("/", "t")
        assert hints(chat)["tab"] == "Complete" and hints(chat)["escape"] == "Clear"
        await pilot.press("escape")
        assert "escape" not in hints(chat)
        area = await open_held_fork(pilot, gated)
        await pilot.pause()
        assert hints(chat)["tab"] == "Next tab" and hints(chat)["escape"] == "Abort fork"
        await pilot.press("f1")
        await pilot.pause()
        assert area.active_label == "a" and hints(chat)["escape"] == "Terminate branch"
        area.tabs.focus()
        await pilot.pause()
        assert hints(chat)["ctrl+g"] == "Input"
        gated.release_all()
