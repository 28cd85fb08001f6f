"""A conflicting pick in the TUI is refused by the engine's one conflict rule (issue 23).

The app no longer checks conflicts itself: it passes ``MergeAction.pick(label,
on_conflict="refuse")`` and the engine refuses (``ConflictError``, nothing changed). What
the user sees is what it was: the same one-line notice, every file, the chat and the fork
as they were, another branch still pickable.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from forkdeck.merge.merge_picker import MergePickerModal
from forkdeck.merge.outcome import MergeConflict
from forkdeck.session import ChatSession

from branching_core import ConflictError, MergeAction
from branching_core.fork import BranchSpec
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

REFUSED = (
    "merge failed: branch b was not merged: b.txt changed here since the fork. Nothing "
    "changed (files, chat, fork): pick another branch, abort the fork, or undo those changes "
    "and /merge again"
)


async def test_picking_a_conflicting_branch_in_the_picker_says_so_and_changes_nothing(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_fork(pilot, ["!echo a > a.txt", "!echo b > b.txt"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        (project / "b.txt").write_text("mine\n")  # the parent wrote b.txt since the fork
        history = list(app.session.history)
        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        await pilot.press("2", "enter")
        await wait_for(pilot, lambda: "was not merged" in chat.last_notice, what="the error")
        assert chat.last_notice == REFUSED
        assert (project / "b.txt").read_text() == "mine\n" and not (project / "a.txt").exists()
        assert app.session.fork_active and app.session.history == history
        assert chat.fork_area is not None  # the fork view stays

        # the other branch merges as usual
        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        await pilot.press("1", "enter")
        await wait_for(pilot, lambda: not app.session.fork_active, what="the merge")
        assert (project / "a.txt").read_text() == "a\n"
        assert (project / "b.txt").read_text() == "mine\n"


async def test_the_refusal_is_the_engines_conflict_error(project: Path, gated: GatedModel) -> None:
    """The session's merge asks the engine to refuse: the ``MergeConflict`` the user sees
    is raised from the engine's ``ConflictError`` (the one rule), not from a check of the
    app's own."""
    session = ChatSession(project, requested_model=gated.model)
    await asyncio.to_thread(session.prepare)
    try:
        coordinator = await session.start_fork(
            [BranchSpec("a", "!echo a > a.txt"), BranchSpec("b", "!echo b > b.txt")], None
        )
        await coordinator.wait()
        (project / "b.txt").write_text("mine\n")
        with pytest.raises(MergeConflict) as info:
            await session.merge(MergeAction.pick("b"))
        cause = info.value.__cause__
        assert isinstance(cause, ConflictError) and cause.paths == ["b.txt"]
        assert info.value.label == "b" and info.value.paths == ["b.txt"]
        assert session.fork_active and not coordinator.is_resolved
        assert (project / "b.txt").read_text() == "mine\n" and not (project / "a.txt").exists()
    finally:
        await session.aclose()
