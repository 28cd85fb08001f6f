"""Issue 17 in the chat: a combined merge made in ``/fork diff``'s explorer lands in the
chat (files, history with the engine's note), on a real fork of a real ``Agent``."""

from __future__ import annotations

from pathlib import Path

import pytest
from forkdeck.chat.screen import ChatScreen
from forkdeck.merge.merge_picker import MergePickerModal
from forkdeck.review.diff_explorer import DiffExplorerScreen

from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    make_app,
    open_done_fork,
    ready,
    submit,
    wait_for,
)
from tests.app.conftest import chat_screen as _chat


async def test_combined_merge_from_fork_diff_reaches_the_chat(
    project: Path, gated: GatedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no external diff tool: the explorer opens
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = _chat(app)
        await open_done_fork(pilot)
        await submit(pilot, "/fork diff")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffExplorerScreen), what="explorer")
        explorer = app.screen
        assert isinstance(explorer, DiffExplorerScreen)
        explorer.show_path("a.txt")
        await pilot.press("f")
        explorer.show_path("b.txt")
        await pilot.press("f")
        await wait_for(pilot, lambda: explorer.preview is not None, what="the preview")
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, ChatScreen), what="back to chat")
        await wait_for(pilot, lambda: not app.session.fork_active, what="the merge")
        assert (project / "a.txt").read_text() == "a\n"
        assert (project / "b.txt").read_text() == "b\n"
        assert chat.fork_area is None
        assert "merged the combination (history from a): 2 paths written" in "\n".join(
            chat.messages.transcript()
        )
        transcript = "\n".join(chat.messages.transcript())
        assert "The fork was merged by combining branches" in transcript
        assert "- a.txt: from a" in transcript and "- b.txt: from b" in transcript
        note = str(app.session.history[-1].parts[0].content)
        assert note.startswith("The fork was merged by combining branches (base history: a)")


async def test_combined_merge_from_the_merge_pickers_explorer_reaches_the_chat(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = _chat(app)
        await open_done_fork(pilot)
        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffExplorerScreen), what="explorer")
        explorer = app.screen
        assert isinstance(explorer, DiffExplorerScreen)
        explorer.show_path("b.txt")
        await pilot.press("f")
        await wait_for(pilot, lambda: explorer.preview is not None, what="the preview")
        await pilot.press("m")
        await wait_for(pilot, lambda: not app.session.fork_active, what="the merge")
        await wait_for(pilot, lambda: isinstance(app.screen, ChatScreen), what="back to chat")
        assert (project / "b.txt").read_text() == "b\n"
        assert not (project / "a.txt").exists()  # not taken
        await wait_for(pilot, lambda: chat.fork_area is None, what="the fork view closed")
        transcript = "\n".join(chat.messages.transcript())
        assert "- b.txt: from b" in transcript
        assert "merged the combination (history from b)" in transcript
