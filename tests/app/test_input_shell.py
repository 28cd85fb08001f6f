"""``!cmd`` from the chat: sandboxed, in the branch whose tab is shown, stoppable (13.3, 15.5)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    chat_screen,
    make_app,
    open_fork,
    ready,
    states,
    submit,
    wait_for,
)
from tests.support.typed import coordinator_of, view_of


async def test_shell_on_a_branch_tab_runs_in_that_branch_only(
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
        area.select("b")
        await submit(pilot, "!echo trap > trap.txt && pwd")
        await wait_for(
            pilot, lambda: "(exit 0, branch b)" in chat.last_notice, what=lambda: chat.last_notice
        )
        assert not (project / "trap.txt").exists()  # the parent is untouched
        rt_b = coordinator_of(app).get_branch("b")
        assert (view_of(rt_b) / "trap.txt").read_text() == "trap\n"
        rt_a = coordinator_of(app).get_branch("a")
        assert not (view_of(rt_a) / "trap.txt").exists()
        # the output is in b's panel and in the log strip
        assert "$ echo trap > trap.txt && pwd" in area.panel("b").transcript_text
        assert any("exit 0" in line for line in chat.fork_log.lines_text)


async def test_shell_on_the_overview_is_refused(project: Path, gated: GatedModel) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_fork(pilot, ["quick a", "quick b"])
        await submit(pilot, "!echo trap > trap.txt")
        assert "pick a branch tab" in chat.last_notice
        await pilot.pause(0.3)
        assert not (project / "trap.txt").exists()


async def test_a_backgrounded_child_does_not_hold_the_command(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        started = time.monotonic()
        await submit(pilot, "!sleep 30 & echo started")
        await wait_for(
            pilot, lambda: "(exit 0)" in chat.last_notice, timeout=25, what=lambda: chat.last_notice
        )
        assert "started" in chat.last_notice
        # Not a timing assertion on speed: the old runner waited the whole 30 s for the
        # child holding the pipe; wait_for's 25 s timeout would have failed it.
        del started


async def test_esc_stops_a_running_shell_command(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await submit(pilot, "!echo begun; sleep 40; echo never > never.txt")
        await wait_for(pilot, lambda: chat.shell_task is not None, what="the command started")
        await wait_for(pilot, lambda: "running" in chat.status.text, what=lambda: chat.status.text)
        assert "esc stops" in chat.status.text
        await pilot.press("escape")
        await wait_for(
            pilot,
            lambda: "stopped (esc)" in chat.last_notice,
            timeout=10,
            what=lambda: chat.last_notice,
        )
        await pilot.pause(0.5)
        assert not (project / "never.txt").exists()
