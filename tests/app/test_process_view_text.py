"""Issue 24.12: the process view is not empty for branches that only talked: it shows each
branch's prompt, steers, model requests, the user's ``!cmd``s and IDE edits. Real app,
offline model, real workspace branches, the real mirror and its watcher."""

from __future__ import annotations

from pathlib import Path

from forkdeck.review.process_view import ProcessViewModal
from rich.console import Console
from textual.widgets import Static

from tests.app.conftest import (
    TERMINAL,
    chat_screen,
    make_app,
    open_fork,
    ready,
    states,
    submit,
    wait_for,
)


def _plain(widget: Static) -> str:
    console = Console(width=160, record=True)
    console.print(widget.content)
    return console.export_text()


async def test_text_only_branches_show_their_requests_steers_commands_and_edits(
    project: Path,
) -> None:
    app = make_app(project, "offline")
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        area = await open_fork(pilot, ["try the hash table", "try a sorted list"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        coord = app.session.coordinator
        assert coord is not None
        area.select("a")
        await pilot.pause()
        await submit(pilot, "!echo checked > note.txt")  # the user's command in branch a
        await wait_for(pilot, lambda: "exit 0" in chat.last_notice, what=lambda: chat.last_notice)
        mat = coord.mirror_hook.materializer
        await wait_for(pilot, lambda: mat is not None and mat.wait_ready(0), what="the mirror")
        (mat.branch_dir("b") / "from_ide.py").write_text("print('hi')\n")
        await wait_for(pilot, lambda: coord.user_edits() == {"b": ["from_ide.py"]}, what="edit")

        report = coord.process_report()
        assert not any(report.steps.values())  # no tool call at all: the old view was empty
        app.push_screen(ProcessViewModal(report))
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ProcessViewModal)
        title = str(modal.query_one("#process-title", Static).content)
        assert "2 model requests · 0 tool calls" in title
        text = _plain(modal.query_one("#process-moments", Static))
        assert "try the hash table" in text and "try a sorted list" in text
        assert "request 1: answered 'offline model (no LLM) got" in text
        assert "!echo checked > note.txt" in text
        assert "you edited from_ide.py" in text
        kinds = {label: [m.kind for m in ms] for label, ms in report.moments.items()}
        assert kinds == {"a": ["prompt", "request", "command"], "b": ["prompt", "request", "edit"]}
        await pilot.press("escape")
