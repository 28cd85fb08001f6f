"""Esc as people press it: out of habit, with text typed, followed by Enter (issue 13.4)."""

from __future__ import annotations

from pathlib import Path

from forkdeck.common.confirm import ConfirmModal

from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    burst,
    chat_screen,
    escape,
    make_app,
    open_fork,
    open_held_fork,
    ready,
    settle,
    states,
    typed,
    wait_for,
)


async def test_esc_then_enter_on_the_overview_does_not_abort_the_fork(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_held_fork(pilot, gated)
        await escape(pilot, ConfirmModal)
        assert app.screen.focused is not None and app.screen.focused.id == "no"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is chat, what="the dialog closed")
        await settle(pilot)
        assert app.session.fork_active and chat.fork_area is not None
        assert set(states(app).values()) == {"running"}
        gated.release_all()


async def test_esc_with_text_only_clears_the_text(project: Path, gated: GatedModel) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_held_fork(pilot, gated)
        burst(app, *typed(">>a half a thought"), "escape")
        await settle(pilot)
        assert chat.input.value == ""
        assert app.screen is chat  # no confirm dialog: Esc only cleared the text
        assert app.session.fork_active and set(states(app).values()) == {"running"}
        await pilot.press("escape")  # now empty: Esc means "abort", and asks first
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="confirm")
        await pilot.press("n")
        gated.release_all()


async def test_esc_on_a_finished_branch_offers_nothing_to_terminate(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        area = await open_fork(pilot, ["quick a", "quick b"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        area.select("a")
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is chat
        assert "branch a is done: nothing to stop" in chat.last_notice
