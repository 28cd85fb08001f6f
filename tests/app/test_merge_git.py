"""Issue 25.5: the merge picker's git line and its "merge and commit" / "export as branch"
options, and what ``/merge`` does with them (real forks, real git, Pilot)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from forkdeck.merge.git_choice import GitChoice
from forkdeck.merge.merge_picker import MergePickerModal
from forkdeck.merge.workflow import MergeWorkflow
from forkdeck.session import ChatSession
from rich.text import Text
from textual.widgets import Static

from branching_core import MergeAction
from branching_core.fork import BranchSpec
from tests.app.conftest import GatedModel
from tests.app.fixtures_merge import HOSTILE_NAME, ForkRun, ScreenHost, run_fork
from tests.app.test_merge_workflow import AnsweringUI
from tests.git.repo import git, head, make_repo, porcelain

SIZE = (120, 36)


@pytest.fixture
async def fork_run(tmp_path: Path) -> AsyncIterator[ForkRun]:
    project = make_repo(
        tmp_path / "project", {"src/app.py": "VALUE = 1\n", HOSTILE_NAME: "original\n"}
    )
    (project / "mine.txt").write_text("the user's own untracked file\n")
    run = await run_fork(project)
    yield run
    await run.coordinator.aclose()


def _text(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


async def _git_line(pilot: Any) -> str:
    for _ in range(100):
        await pilot.pause(0.05)
        widget = pilot.app.screen.query_one("#merge-picker-git", Static)
        if widget.display and _text(widget):
            return _text(widget)
    raise AssertionError("the git line never appeared")


async def test_picker_shows_git_state_and_c_b_choose_git_options(fork_run: ForkRun) -> None:
    run = fork_run
    app = ScreenHost(
        lambda: MergePickerModal(run.report, run.statuses, coordinator=run.coordinator)
    )
    async with app.run_test(size=SIZE) as pilot:
        line = await _git_line(pilot)
        assert line.startswith(f"git: on main at {head(run.project)[:8]}, ")
        assert "1 other dirty file" in line  # mine.txt; a's own paths do not count
        await pilot.press("c")
        await pilot.pause()
    assert app.results == [GitChoice(MergeAction.pick("a"), "commit")]
    app = ScreenHost(
        lambda: MergePickerModal(run.report, run.statuses, coordinator=run.coordinator)
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right", "b")
        await pilot.pause()
    assert app.results == [GitChoice(MergeAction.pick("b"), "export")]
    assert porcelain(run.project) == "?? mine.txt\n"  # the picker changed nothing


async def _forked(project: Path, gated: GatedModel) -> ChatSession:
    session = ChatSession(project, requested_model=gated.model)
    await asyncio.to_thread(session.prepare)
    coordinator = await session.start_fork(
        [BranchSpec("a", "!echo a > a.txt"), BranchSpec("b", "!echo b > b.txt")], None
    )
    await coordinator.wait()
    return session


@pytest.fixture
async def session(tmp_path: Path, gated: GatedModel) -> AsyncIterator[ChatSession]:
    project = make_repo(tmp_path / "project")
    (project / "README.txt").write_text("the user's unstaged edit\n")
    s = await _forked(project, gated)
    yield s
    await s.aclose()


async def test_merge_and_commit_from_the_picker(session: ChatSession) -> None:
    assert session.coordinator is not None
    project = session.coordinator.parent_path
    before = head(project)
    ui = AnsweringUI(picks=[GitChoice(MergeAction.pick("b"), "commit")])  # type: ignore[list-item]
    result = await MergeWorkflow(session, ui).run()
    assert result is not None and result.git_commit == head(project)
    assert git(project, "rev-parse", "HEAD^").strip() == before
    assert git(project, "diff", "--name-only", before, "HEAD").split() == ["b.txt"]
    assert porcelain(project) == " M README.txt\n"
    assert "Forkdeck-Branch: b" in git(project, "log", "-1", "--format=%B")


async def test_export_as_branch_lands_nothing_and_keeps_the_fork(session: ChatSession) -> None:
    coordinator = session.coordinator
    assert coordinator is not None
    project = coordinator.parent_path
    before = (head(project), porcelain(project))
    ui = AnsweringUI(picks=[GitChoice(MergeAction.pick("a"), "export")])  # type: ignore[list-item]
    assert await MergeWorkflow(session, ui).run() is None
    assert (head(project), porcelain(project)) == before and not (project / "a.txt").exists()
    assert session.fork_active
    name = f"forkdeck/export/{coordinator.fork_id}-a"
    assert ui.said(f"exported a as git branch {name}")
    assert git(project, "diff", "--name-only", "HEAD", name).split() == ["a.txt"]
