"""Issue 24.7: ``/fork`` with every steer empty re-runs the last task in each branch
(best-of-N), the steer placeholder is visibly a placeholder, and a long steer is readable
while it is typed. Real app, real offline model, real workspace branches."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from forkdeck.fork.fork_picker import STEER_PLACEHOLDER, ForkPickerModal, ForkRequest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
from textual.widgets import Input, Static

from branching_core.config import Settings
from branching_core.fork import BranchSpec
from tests.app.conftest import TERMINAL, chat_screen, make_app, parent_turn, ready, submit, wait_for
from tests.app.test_fork_modals import PickerHost

TASK = "read README.txt"


def _prompts(history: Sequence[object]) -> list[str]:
    return [
        str(part.content)
        for message in history
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


async def test_all_empty_steers_fork_the_same_task_in_every_branch(project: Path) -> None:
    app = make_app(project, "offline")
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await parent_turn(pilot, TASK)
        await submit(pilot, "/fork")
        await wait_for(pilot, lambda: isinstance(app.screen, ForkPickerModal), what="picker")
        await pilot.press("enter")  # every steer left empty
        session = app.session
        await wait_for(pilot, lambda: session.coordinator is not None, what="the fork")
        coordinator = session.coordinator
        assert coordinator is not None
        await coordinator.wait(timeout=60)
        statuses = coordinator.inspect_branches()
        assert len(statuses) == session.settings.fork_branch_count
        for status in statuses:
            runtime = coordinator.get_branch(status.label)
            history = list(runtime.history)
            # the task once (re-sampled, not asked twice), then the branch's own answer
            assert _prompts(history) == [TASK], status.label
            last = history[-1]
            assert isinstance(last, ModelResponse)
            assert any(
                isinstance(p, TextPart) and p.content.startswith("Done: 1 step")
                for p in last.parts
            )
            calls = [m for m in history if isinstance(m, ModelResponse)]
            assert len(calls) == 2  # the read it ran again, then the summary: one answer only
        assert "error" not in chat_screen(app).last_notice


async def test_all_empty_steers_without_a_task_say_what_to_do(project: Path) -> None:
    app = make_app(project, "offline")
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await submit(pilot, "/fork")
        await wait_for(pilot, lambda: isinstance(app.screen, ForkPickerModal), what="picker")
        await pilot.press("enter")
        chat = chat_screen(app)
        await wait_for(
            pilot, lambda: "no task yet" in chat.last_notice, what=lambda: chat.last_notice
        )
        assert app.session.coordinator is None


async def test_empty_steers_are_a_request_and_the_placeholder_looks_like_one() -> None:
    app = PickerHost(Settings(), n=2)
    async with app.run_test(size=(110, 34)) as pilot:
        await pilot.press("ctrl+f")
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, ForkPickerModal)
        steer = picker.query_one("#steer-1", Input)
        assert steer.placeholder == STEER_PLACEHOLDER
        placeholder = steer.get_component_rich_style("input--placeholder")
        assert placeholder.italic
        value_style = steer.rich_style
        assert placeholder.color != value_style.color  # dimmer than a typed value
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [
        ForkRequest([BranchSpec("a", ""), BranchSpec("b", "")], aggregate_budget_usd=None)
    ]


async def test_a_long_steer_is_shown_in_full_while_typed() -> None:
    app = PickerHost(Settings(), n=2)
    long_steer = (
        "rewrite the parser as a recursive descent one, keep the public API, add tests for "
        "nested brackets and unicode identifiers, and measure it against the old one"
    )
    async with app.run_test(size=(110, 34)) as pilot:
        await pilot.press("ctrl+f")
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, ForkPickerModal)
        full = picker.query_one("#steer-full", Static)
        picker.query_one("#steer-1", Input).focus()
        await pilot.pause()
        await pilot.press(*"short")
        await pilot.pause()
        assert not full.display  # fits its cell: nothing extra
        await pilot.press(*long_steer[5:])
        await pilot.pause()
        assert full.display
        assert str(full.content) == f"steer 1: short{long_steer[5:]}"
        assert full.size.height >= 2  # wrapped, every word on screen
        picker.query_one("#label-2", Input).focus()
        await pilot.pause()
        assert not full.display  # another field focused: the line goes away
        await pilot.press("escape")
