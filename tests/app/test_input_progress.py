"""Long waits show a spinner and elapsed time in the status line (13.10)."""

from __future__ import annotations

from pathlib import Path

from forkdeck.chat.screen import ChatScreen

from tests.app.conftest import TERMINAL, make_app, ready, wait_for


async def test_busy_shows_what_is_awaited_with_elapsed_seconds(project: Path) -> None:
    import asyncio

    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = app.chat
        assert isinstance(chat, ChatScreen)
        release = asyncio.Event()

        async def wait_long() -> None:
            with chat.busy("asking the judge"):
                await release.wait()

        task = asyncio.create_task(wait_long())
        await wait_for(
            pilot,
            lambda: "asking the judge… 1." in chat.status.text,
            what=lambda: chat.status.text,
        )
        release.set()
        await task
        await pilot.pause()
        assert "asking the judge" not in chat.status.text
        assert app.session.busy_label is None
