"""Branch jumping that works in every terminal (13.5) and typing after a click (13.14)."""

from __future__ import annotations

from pathlib import Path

from textual import events

from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    burst,
    chat_screen,
    make_app,
    open_fork,
    ready,
    settle,
)


async def test_f_keys_and_ctrl_page_keys_switch_branches(project: Path, gated: GatedModel) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        area = await open_fork(pilot, ["quick a", "quick b", "quick c"])
        await pilot.press("f2")
        assert area.active_label == "b"
        await pilot.press("f3")
        assert area.active_label == "c"
        await pilot.press("f9")  # no branch 9: nothing changes
        assert area.active_label == "c"
        await pilot.press("ctrl+pagedown")
        assert area.active_label is None  # c -> overview
        await pilot.press("ctrl+pageup")
        assert area.active_label == "c"
        assert app.focused is chat.input


async def test_alt_digits_sent_as_esc_prefix_jump_during_a_fork_only(
    project: Path, gated: GatedModel
) -> None:
    """tmux/xterm send alt+1 as ESC 1, which Textual turns into ``¡``; macOS types ``¡``."""
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        burst(app, "¡")  # no fork: a character like any other
        await settle(pilot)
        assert chat.input.value == "¡"
        chat.input.value = ""
        area = await open_fork(pilot, ["quick a", "quick b", "quick c"])
        app.post_message(events.Key("pound_sign", "£"))  # alt+3
        await settle(pilot)
        assert area.active_label == "c" and chat.input.value == ""
        app.post_message(events.Key("inverted_exclamation_mark", "¡"))  # alt+1
        await settle(pilot)
        assert area.active_label == "a"
        await pilot.press("alt+2")  # terminals that report alt as a modifier
        assert area.active_label == "b"


async def test_typing_after_clicking_a_tab_goes_to_the_composer(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        area = await open_fork(pilot, ["quick a", "quick b"])
        await pilot.click(area.tabs.chip("b"))
        await settle(pilot)
        assert area.active_label == "b"
        burst(app, "h", "i")
        await settle(pilot)
        assert chat.input.value == "hi"
        assert app.focused is chat.input
