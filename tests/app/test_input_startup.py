"""Typing from the first frame: lines sent during start-up are queued, then run (13.16)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from forkdeck.chat.screen import ChatScreen
from forkdeck.forkdeck_app import ForkdeckApp
from forkdeck.session import ChatSession, StartupNotice

from tests.app.conftest import TERMINAL, GatedModel, burst, ready, settle, typed, wait_for


class SlowStart(ChatSession):
    """A real session whose preparation (pydantic-ai import, agent) takes until ``go``."""

    go: threading.Event

    def prepare(self) -> list[StartupNotice]:
        self.go.wait(30)
        return super().prepare()


def slow_app(root: Path, model: Any) -> tuple[ForkdeckApp, threading.Event]:
    session = SlowStart(root, requested_model=model)
    session.go = threading.Event()
    return ForkdeckApp(session, cursor_blink=False, offer_recovery=False), session.go


async def test_lines_sent_during_start_up_are_queued_and_sent_in_order(
    project: Path, gated: GatedModel
) -> None:
    app, go = slow_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.pause()
        chat = app.chat
        assert isinstance(chat, ChatScreen)
        assert not app.session.ready
        burst(app, *typed("first question"), "enter", *typed("!echo queued > q.txt"), "enter")
        burst(app, *typed("second question"), "enter")
        await settle(pilot)
        assert chat.pending == ["first question", "!echo queued > q.txt", "second question"]
        assert "queued until the model is ready: second question" in chat.last_notice
        assert "3 queued" in chat.status.text
        assert not gated.requests  # nothing was sent, nothing was lost
        go.set()
        await ready(pilot)
        await wait_for(pilot, lambda: bool(gated.prompts_of("second question")), what="sent")
        await wait_for(pilot, lambda: not chat.turn_running and not chat.pending)
        assert gated.prompts_of("second question")[-1] == ["first question", "second question"]
        await wait_for(pilot, lambda: (project / "q.txt").exists(), what="the !cmd ran")
        assert chat.input.value == ""


async def test_help_is_not_queued(project: Path, gated: GatedModel) -> None:
    app, go = slow_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.pause()
        chat = app.chat
        assert isinstance(chat, ChatScreen)
        burst(app, *typed("/help"), "enter")
        await settle(pilot)
        assert chat.pending == [] and "Commands:" in chat.last_notice
        go.set()
        await ready(pilot)


async def test_lines_typed_while_a_command_or_turn_runs_wait_their_turn(
    project: Path, gated: GatedModel
) -> None:
    gate = gated.gate("slow")
    app, go = slow_app(project, gated.model)
    go.set()
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = app.chat
        assert isinstance(chat, ChatScreen)
        burst(app, *typed("!sleep 1; echo one > one.txt"), "enter")
        burst(app, *typed("!echo two > two.txt"), "enter")
        await settle(pilot)
        assert chat.pending == ["!echo two > two.txt"]
        assert "queued until the running !command ends" in chat.last_notice
        await wait_for(pilot, lambda: (project / "two.txt").exists(), what="the second ran")
        assert (project / "one.txt").read_text() == "one\n"
        burst(app, *typed("answer slow"), "enter", *typed("next one"), "enter")
        await wait_for(pilot, lambda: bool(gated.requests), what="the model was asked")
        assert chat.pending == ["next one"]
        gate.set()
        await wait_for(pilot, lambda: bool(gated.prompts_of("next one")), what="sent")
        assert gated.prompts_of("next one")[-1] == ["answer slow", "next one"]
