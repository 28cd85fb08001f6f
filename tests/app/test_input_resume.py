"""``forkdeck --resume``: the chat survives a restart, and its file is never committed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from forkdeck.chat.screen import ChatScreen
from forkdeck.forkdeck_app import ForkdeckApp
from forkdeck.session import ChatSession
from forkdeck.tui import build_parser

from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    chat_screen,
    make_app,
    ready,
    submit,
    wait_for,
)


async def test_resume_continues_the_last_chat(project: Path, gated: GatedModel) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await submit(pilot, "remember the word banana")
        await wait_for(pilot, lambda: not chat.turn_running and len(app.session.history) >= 2)
    saved = project / ".pydantic-deep" / "sessions" / "latest.json"
    assert saved.exists()

    session = ChatSession(project, requested_model=gated.model)
    again = ForkdeckApp(session, cursor_blink=False, offer_recovery=False, resume=True)
    async with again.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        resumed = again.chat
        assert isinstance(resumed, ChatScreen)
        assert "resumed the last chat" in "\n".join(resumed.messages.transcript())
        assert "remember the word banana" in "\n".join(resumed.messages.transcript())
        await submit(pilot, "what was the word?")
        await wait_for(pilot, lambda: bool(gated.prompts_of("what was the word?")), what="sent")
        assert gated.prompts_of("what was the word?")[-1] == [
            "remember the word banana",
            "what was the word?",
        ]


async def test_without_resume_a_new_chat_starts(project: Path, gated: GatedModel) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await submit(pilot, "first run")
        await wait_for(pilot, lambda: len(app.session.history) >= 2)
    again = make_app(project, gated.model)
    async with again.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        assert again.session.history == []


async def test_a_broken_saved_chat_is_reported_and_left_alone(project: Path) -> None:
    saved = project / ".pydantic-deep" / "sessions" / "latest.json"
    saved.parent.mkdir(parents=True)
    saved.write_text("{not json")
    session = ChatSession(project)
    app = ForkdeckApp(session, cursor_blink=False, offer_recovery=False, resume=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        assert "cannot read the saved chat" in chat.last_notice or any(
            "cannot read the saved chat" in line for line in chat.messages.transcript()
        )
    assert saved.read_text() == "{not json"


def test_the_sessions_folder_is_ignored_by_git(project: Path, gated: GatedModel) -> None:
    from forkdeck.chat_store import save_history

    subprocess.run(["git", "init", "-q", str(project)], check=True)
    save_history(project, [])
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "sessions" not in status


def test_resume_flag_is_parsed() -> None:
    assert build_parser().parse_args(["--resume"]).resume is True
    assert build_parser().parse_args([]).resume is False
