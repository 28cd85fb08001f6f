"""While a fork is open, what the chat says is visible: the log strip and toasts (13.2)."""

from __future__ import annotations

from pathlib import Path

from forkdeck.chat.screen import ChatScreen

from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    chat_screen,
    make_app,
    open_fork,
    open_held_fork,
    ready,
    states,
    submit,
    wait_for,
)


def on_screen(chat: ChatScreen, text: str) -> bool:
    """``text`` is in the log strip *and* the strip is drawn (not hidden, has a region)."""
    log = chat.fork_log
    return log.display and log.region.height > 0 and any(text in line for line in log.lines_text)


async def test_notices_and_command_output_show_in_the_fork_view(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        assert not chat.fork_log.display  # no fork: the transcript shows everything
        area = await open_held_fork(pilot, gated)
        assert chat.messages.display is False  # the fork view hides the transcript...
        assert on_screen(chat, "forked 2 branches: a, b")  # ...but not what the chat says
        await submit(pilot, "/cost")
        assert on_screen(chat, "chat: $")
        await submit(pilot, "/tokens")
        assert on_screen(chat, " out; fork: ")
        await submit(pilot, "/help")
        assert on_screen(chat, ">>label message")
        await submit(pilot, ">>a steer it")
        assert on_screen(chat, ">>a: steer it")
        toasts = [n.message for n in app._notifications]
        assert ">>a: steer it" in toasts  # a short confirmation also pops up
        area.select("b")
        await submit(pilot, "!echo from-b")
        await wait_for(
            pilot, lambda: on_screen(chat, "from-b"), what=lambda: chat.fork_log.lines_text
        )
        gated.release_all()
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        await submit(pilot, "/copy")
        assert "copied branch b's transcript" in chat.last_notice


async def test_the_log_strip_goes_away_with_the_fork(project: Path, gated: GatedModel) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_fork(pilot, ["quick a", "quick b"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        assert chat.fork_log.display
        chat.close_fork_view()
        await pilot.pause()
        assert not chat.fork_log.display and chat.messages.display
