"""The composer as people type: keys in one read, Enter, newlines, paste, history, Tab.

Keys are queued the way the terminal driver does with one read of input (every event
posted before any is handled); ``pilot.press`` would wait for each key and hide the
ordering defect of issue 13.1.
"""

from __future__ import annotations

from pathlib import Path

from textual import events

from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    burst,
    chat_screen,
    make_app,
    open_held_fork,
    ready,
    settle,
    states,
    typed,
    wait_for,
)


async def test_each_enter_sends_exactly_what_was_typed_before_it(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        sent: list[str] = []
        original = chat.handle_line
        chat.handle_line = lambda text: (sent.append(text), original(text))  # type: ignore[method-assign]
        burst(app, *typed("!echo one"), "enter", *typed("!echo two"))
        await settle(pilot)
        assert sent == ["!echo one"]
        assert chat.input.value == "!echo two"  # typed after Enter: still in the composer
        await wait_for(
            pilot, lambda: "one\n(exit 0)" in chat.last_notice, what=lambda: chat.last_notice
        )
        burst(app, "enter")
        await settle(pilot)
        assert sent == ["!echo one", "!echo two"]
        assert chat.input.value == ""
        await wait_for(
            pilot, lambda: "two\n(exit 0)" in chat.last_notice, what=lambda: chat.last_notice
        )


async def test_bindings_of_the_composer_keep_their_order_with_typed_keys(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        burst(app, "a", "b", "backspace", "c", "left", "d")
        await settle(pilot)
        assert chat.input.value == "adc"


async def test_steers_typed_ahead_reach_only_the_branch_they_name(
    project: Path, gated: GatedModel
) -> None:
    gate = gated.gate("hold")
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_held_fork(pilot, gated)
        burst(app, *typed(">>a only for a"), "enter", *typed(">>b write b.txt"), "enter")
        await settle(pilot)
        await wait_for(pilot, lambda: chat.input.value == "", what=lambda: chat.input.value)
        gate.set()
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        told_a = [p for r in gated.prompts_of("hold a") for p in r]
        told_b = [p for r in gated.prompts_of("hold b") for p in r]
        assert "only for a" in told_a and "write b.txt" not in " ".join(told_a)
        assert "write b.txt" in told_b and "only for a" not in " ".join(told_b)


async def test_ctrl_j_inserts_a_newline_and_enter_sends_every_line(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        burst(app, *typed("first"), "ctrl+j", *typed("second"), "shift+enter", *typed("third"))
        await settle(pilot)
        assert chat.input.value == "first\nsecond\nthird"
        assert "3 lines" in str(chat.input.border_subtitle)
        burst(app, "enter")
        await wait_for(pilot, lambda: bool(gated.prompts_of("third")), what="sent")
        assert gated.prompts_of("third")[0][-1] == "first\nsecond\nthird"
        assert chat.input.value == ""


async def test_a_bracketed_paste_keeps_every_line(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        block = "write notes.txt\nline one\nline two\nend"
        app.post_message(events.Paste(block))
        await settle(pilot)
        assert chat.input.value == block  # the paste is not sent: Enter sends it
        assert "4 lines" in str(chat.input.border_subtitle)
        burst(app, "enter")
        await wait_for(
            pilot, lambda: (project / "notes.txt").exists(), what=lambda: chat.messages.transcript()
        )
        assert (project / "notes.txt").read_text() == "line one\nline two\n"


async def test_history_moves_only_from_the_first_and_last_line(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        entry = chat.input
        entry.value = "/tokens"
        await pilot.press("enter")
        burst(app, *typed("two"), "ctrl+j", *typed("lines"))
        await settle(pilot)
        await pilot.press("up")  # on the last line of two: moves the cursor, not history
        assert entry.value == "two\nlines" and entry.cursor_location[0] == 0
        await pilot.press("up")  # first line: the older entry, the draft kept
        assert entry.value == "/tokens"
        await pilot.press("down")
        assert entry.value == "two\nlines"


async def test_tab_completes_a_slash_command(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        burst(app, "/", "t", "o")
        await settle(pilot)
        assert "/tokens" in str(chat.input.border_subtitle)
        await pilot.press("tab")
        assert chat.input.value == "/tokens "
        chat.input.value = "/fo"
        await pilot.press("tab")
        assert chat.input.value == "/fork"  # the longest prefix /fork, /fork-branches... share
        assert app.focused is chat.input


async def test_the_offline_greeting_mentions_write(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        text = "\n".join(chat_screen(app).messages.transcript())
        assert "write PATH" in text and "end" in text
