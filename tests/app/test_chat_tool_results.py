"""Issue 24.8: a tool call in the chat shows its whole result: the head under the call
while collapsed (with how much more there is), everything on expanding, and ``ctrl+o``
opens the full-output screen in the chat as it does on a branch panel. The offline
model's summary names every entry of a listing (a git repository's ``ls`` said only
``.git/``). Real app, offline model, real tools, a real git repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

from forkdeck.chat.message_list import RESULT_PREVIEW_LINES, ToolCallView
from forkdeck.common.tool_output import ToolOutputModal
from textual.widgets import Static

from tests.app.conftest import TERMINAL, chat_screen, make_app, parent_turn, ready


async def test_results_are_previewed_expandable_and_ctrl_o_shows_them(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("alpha.py", "beta.py", "gamma.py"):
        (root / name).write_text(f"# {name}\n")
    (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    app = make_app(root, "offline")
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await pilot.press("ctrl+o")  # nothing yet: said, no screen
        await pilot.pause()
        assert chat.last_notice == "no tool output in the chat yet"
        await parent_turn(pilot, "ls")
        answer = chat.messages.last_assistant_text() or ""
        assert "alpha.py" in answer and "beta.py" in answer and "gamma.py" in answer
        listing = chat.messages.query(ToolCallView).last()
        preview = listing.query_one(".tool-preview", Static)
        assert preview.display and listing.collapsed
        assert "alpha.py" in str(preview.content) and "gamma.py" in str(preview.content)

        await parent_turn(pilot, "read long.txt")
        reading = chat.messages.query(ToolCallView).last()
        shown = str(reading.query_one(".tool-preview", Static).content)
        assert shown.splitlines()[:RESULT_PREVIEW_LINES] == [
            f"line {n}" for n in range(1, RESULT_PREVIEW_LINES + 1)
        ]
        assert f"{10 - RESULT_PREVIEW_LINES} more lines" in shown and "ctrl+o" in shown
        reading.collapsed = False  # expanded: the whole result, the preview gives way
        await pilot.pause()
        assert not reading.query_one(".tool-preview", Static).display
        assert str(reading.query_one(".tool-result", Static).content).count("line ") == 10

        await pilot.press("ctrl+o")
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ToolOutputModal)
        assert modal.shown.tool_name == "read_file" and modal.shown.text.count("line ") == 10
        assert str(modal.query_one("#title", Static).content).startswith("the chat · read_file")
        await pilot.press("left")  # the older one: the listing
        assert modal.shown.tool_name == "list_dir" and "beta.py" in modal.shown.text
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is chat
