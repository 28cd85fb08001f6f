"""The command palette (ctrl+p) lists every slash command and setting and runs them."""

from __future__ import annotations

from pathlib import Path

from forkdeck.chat.screen import ChatScreen
from forkdeck.commands import COMMANDS, palette_entries
from textual.command import CommandPalette

from tests.app.conftest import TERMINAL, make_app, ready, wait_for


def test_every_command_has_a_palette_entry() -> None:
    lines = {e.line.strip() for e in palette_entries()}
    assert {f"/{name}" for name in COMMANDS} <= lines


async def test_ctrl_p_runs_a_command_and_prefills_a_setting(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = app.chat
        assert isinstance(chat, ChatScreen)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette")
        await pilot.press(*"/tokens")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is chat, what="palette closed")
        await wait_for(
            pilot,
            lambda: chat.last_notice.startswith("chat: 0 in / 0 out"),
            what=lambda: chat.last_notice,
        )
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette")
        await pilot.press(*"/fork-budget per")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is chat, what="palette closed")
        assert chat.input.value == "/fork-budget "
        assert app.focused is chat.input
