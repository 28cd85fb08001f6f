"""Streaming and key handling redraw only what changed (issue 13, Performance).

A Textual layout reflows the whole screen; these tests count the screen's layouts (the
``Screen._refresh_layout`` calls of the real app) around real widget updates, and check
that what is drawn is still right. No wall-clock figures here: those are in
``benchmarks/tui.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from forkdeck.chat.footer import ChatFooter
from forkdeck.common.redraw import update_in_place
from forkdeck.fork.branch_panel import BranchPanelWidget
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static, TextArea

from tests.app.fixtures_fork import HostApp, screen_text, wait_until

SIZE = (80, 24)


def count_layouts(screen: Screen[Any], monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-item list counting the screen's layouts from now on."""
    calls = [0]
    original: Callable[..., None] = screen._refresh_layout

    def counted(*args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        original(*args, **kwargs)

    monkeypatch.setattr(screen, "_refresh_layout", counted)
    return calls


class Lines(App[None]):
    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("one line", id="auto")
            yield Static("fixed", id="fixed")

    CSS = "#fixed { height: 1; }"


async def test_update_in_place_lays_out_only_when_the_height_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = Lines()
    async with app.run_test(size=SIZE) as pilot:
        auto = app.query_one("#auto", Static)
        await pilot.pause()
        layouts = count_layouts(app.screen, monkeypatch)

        assert update_in_place(auto, "one line, a few words longer") is False
        await pilot.pause()
        assert layouts[0] == 0
        assert "one line, a few words longer" in screen_text(app)

        assert update_in_place(auto, "first line\nsecond line") is True  # one row taller
        await pilot.pause()
        assert layouts[0] >= 1
        seen = layouts[0]
        assert auto.size.height == 2
        assert "second line" in screen_text(app)

        fixed = app.query_one("#fixed", Static)
        assert update_in_place(fixed, "a fixed-height line changed") is False
        await pilot.pause()
        assert layouts[0] == seen
        assert "a fixed-height line changed" in screen_text(app)


async def test_streamed_words_that_keep_the_line_count_cost_no_screen_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: every flush of the shown panel (10 a second) reflowed
    the whole screen, even when the words fitted on the block's last line."""
    app = HostApp(lambda: BranchPanelWidget("alpha", steer="go"))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(BranchPanelWidget)
        panel.append_text("w0 ")
        panel.flush()
        await pilot.pause()
        layouts = count_layouts(app.screen, monkeypatch)
        for i in range(1, 6):  # a few short words: still one line at 80 columns
            panel.append_text(f"w{i} ")
            panel.flush()
            await pilot.pause()
        assert layouts[0] == 0
        assert "w0 w1 w2 w3 w4 w5" in screen_text(app)

        panel.append_text("\n".join(f"row {i}" for i in range(40)))  # taller: laid out
        panel.flush()
        await wait_until(pilot, lambda: "row 39" in screen_text(app))
        assert layouts[0] >= 1
        assert "row 0" not in screen_text(app)  # still follows the newest line


class Keys(App[None]):
    BINDINGS = [("ctrl+t", "noop", "Shown key"), ("ctrl+r", "more", "Another key")]
    more = False

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.more if action == "more" else True

    def compose(self) -> ComposeResult:
        yield TextArea(id="a")
        yield TextArea(id="b")
        yield ChatFooter()

    def action_noop(self) -> None:
        pass

    def action_more(self) -> None:
        pass


async def test_the_footer_is_not_rebuilt_when_its_keys_stay_the_same() -> None:
    """Before: the stock Footer re-mounted every key on each focus change."""
    app = Keys()
    async with app.run_test(size=SIZE) as pilot:
        footer = app.query_one(ChatFooter)
        await wait_until(pilot, lambda: "Shown key" in screen_text(app))
        keys_before = list(footer.children)
        rebuilds = footer.rebuilds
        app.query_one("#b", TextArea).focus()  # the shown bindings do not change
        await pilot.pause()
        app.screen.refresh_bindings()
        await pilot.pause()
        assert footer.rebuilds == rebuilds
        assert list(footer.children) == keys_before
        assert "Shown key" in screen_text(app)

        assert "Another key" not in screen_text(app)
        app.more = True  # what is shown changes
        app.screen.refresh_bindings()
        await wait_until(pilot, lambda: "Another key" in screen_text(app))
        assert footer.rebuilds > rebuilds


class Modes(App[None]):
    """One key whose label depends on a mode, like Esc's "Abort fork"/"Terminate branch"."""

    BINDINGS = [
        ("ctrl+t", "act('abort')", "Abort all"),
        ("ctrl+t", "act('terminate')", "Terminate one"),
        ("ctrl+s", "save", "Save"),
    ]
    mode = "abort"
    done: list[str] = []

    def compose(self) -> ComposeResult:
        yield TextArea()
        yield ChatFooter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return parameters[0] == self.mode if action == "act" else True

    def action_act(self, what: str) -> None:
        self.done.append(what)

    def action_save(self) -> None:
        pass


async def test_a_changed_label_is_redrawn_in_place_and_its_key_runs_the_new_action() -> None:
    """Before: a tab switch (Esc's label changing) re-mounted every footer key."""
    app = Modes()
    async with app.run_test(size=SIZE) as pilot:
        footer = app.query_one(ChatFooter)
        await wait_until(pilot, lambda: "Abort all" in screen_text(app))
        keys_before, rebuilds = list(footer.children), footer.rebuilds
        app.mode = "terminate"
        app.screen.refresh_bindings()
        await wait_until(pilot, lambda: "Terminate one" in screen_text(app))
        assert "Abort all" not in screen_text(app)
        assert "Save" in screen_text(app)
        assert list(footer.children) == keys_before and footer.rebuilds == rebuilds
        await pilot.click(footer.children[0])  # a click on the relabelled key
        await pilot.pause()
        assert app.done == ["terminate"]


async def test_a_streamed_line_that_grows_the_block_costs_one_screen_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the block's new height, stored by the layout itself, asked Textual for a
    second layout of the whole screen (every new line of streamed text, and every tab
    switch to a panel whose text grew while hidden, reflowed the screen twice)."""
    app = HostApp(lambda: BranchPanelWidget("alpha", steer="go"))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(BranchPanelWidget)
        panel.append_text("w0 ")
        panel.flush()
        await pilot.pause()
        block = panel.blocks[-1]
        height = block.size.height
        layouts = count_layouts(app.screen, monkeypatch)
        panel.append_text("\nsecond line of the reply")  # one row taller, no scrolling yet
        panel.flush()
        await wait_until(pilot, lambda: "second line of the reply" in screen_text(app))
        await pilot.pause()
        await pilot.pause()
        assert block.size.height == height + 1
        assert layouts[0] == 1
