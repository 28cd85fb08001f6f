"""Quitting while branches run asks first, and "No" is the default (13.18)."""

from __future__ import annotations

from pathlib import Path

from forkdeck.common.confirm import ConfirmModal

from branching_core.fork import list_open_forks
from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    make_app,
    open_fork,
    ready,
    screen_as,
    states,
    submit,
    wait_for,
)


async def test_ctrl_q_with_running_branches_asks_and_enter_keeps_running(
    project: Path, gated: GatedModel
) -> None:
    gated.gate("hold")
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await open_fork(pilot, ["hold a", "quick b"])
        await wait_for(
            pilot, lambda: states(app)["b"] == "done", what=lambda: states(app)
        )
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="quit asks")
        assert "1 branch(es) still running (a)" in screen_as(app, ConfirmModal).question
        assert app.screen.focused is not None and app.screen.focused.id == "no"
        await pilot.press("ctrl+q")  # a second ctrl+q does not stack a second dialog
        await pilot.press("enter")  # the default: do not quit
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmModal), what="closed")
        assert app.is_running and states(app)["a"] == "running"
        await submit(pilot, "/quit")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="quit asks")
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running)
    assert len(list_open_forks(project)) == 1  # kept for the next start


async def test_quit_without_running_branches_does_not_ask(project: Path, gated: GatedModel) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await open_fork(pilot, ["quick a", "quick b"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: not app.is_running)
