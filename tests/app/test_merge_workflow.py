"""``/merge`` without a screen: ``MergeWorkflow`` on a real ``ChatSession``, its real
``ForkCoordinator`` over a real workspace, branches run by a real pydantic-ai ``Agent`` on a
``FunctionModel`` (``GatedModel``), and the judge a real ``TestModel``.

The user's side is :class:`AnsweringUI`, the workflow's ``MergeUI`` port answered from a
script (what a person would press in the acceptance modal and the picker); nothing is
mounted, so each decision of the workflow is checked on its own: when the judge runs,
what accepting, overriding or cancelling does, and that a refused merge changes nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from forkdeck.merge.workflow import CANCELLED, MergeWorkflow
from forkdeck.session import ChatSession
from pydantic_ai.models.test import TestModel

from branching_core.fork import BranchSpec
from tests.app.conftest import GatedModel


@dataclass
class AnsweringUI:
    """The workflow's ``MergeUI``, answering from ``accepts`` and ``picks`` in order and
    keeping what it was shown."""

    accepts: list[str | None] = field(default_factory=list)
    picks: list[str | None] = field(default_factory=list)
    notices: list[tuple[str, str]] = field(default_factory=list)
    verdicts: list[Any] = field(default_factory=list)
    pickers: list[dict[str, Any]] = field(default_factory=list)

    def notice(self, text: str, severity: str = "information") -> None:
        self.notices.append((text, severity))

    async def accept(self, outcome: Any) -> str | None:
        self.verdicts.append(outcome)
        return self.accepts.pop(0)

    async def pick(
        self, report: Any, statuses: list[Any], *, preselect: str | None, subtitle: str | None
    ) -> str | None:
        self.pickers.append(
            {
                "paths": sorted(e.path for e in report.paths),
                "labels": [s.label for s in statuses],
                "preselect": preselect,
                "subtitle": subtitle,
            }
        )
        return self.picks.pop(0)

    def said(self, fragment: str) -> bool:
        return any(fragment in text for text, _ in self.notices)


def _configure(project: Path, strategy: str) -> None:
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(f'[review]\nmerge_strategy = "{strategy}"\nconfidence_threshold = 0.0\n')


async def _forked(project: Path, gated: GatedModel, strategy: str = "manual") -> ChatSession:
    """A prepared session with an open fork whose branches a and b wrote a.txt / b.txt."""
    _configure(project, strategy)
    session = ChatSession(project, requested_model=gated.model)
    await asyncio.to_thread(session.prepare)
    coordinator = await session.start_fork(
        [BranchSpec("a", "!echo a > a.txt"), BranchSpec("b", "!echo b > b.txt")], None
    )
    await coordinator.wait()
    return session


def _judge_picks(session: ChatSession, winner: str) -> None:
    session.judges = [
        TestModel(
            custom_output_args={"winner": winner, "confidence": 0.9, "rationale": f"{winner} did"}
        )
    ]


@pytest.fixture
async def manual(project: Path, gated: GatedModel) -> Any:
    session = await _forked(project, gated)
    yield session
    await session.aclose()


async def test_manual_strategy_asks_the_picker_and_applies_the_pick(
    project: Path, manual: ChatSession
) -> None:
    ui = AnsweringUI(picks=["pick:b"])
    result = await MergeWorkflow(manual, ui).run()
    assert result is not None and result.winner_label == "b"
    assert ui.verdicts == []  # no judge under "manual"
    assert ui.pickers == [
        {"paths": ["a.txt", "b.txt"], "labels": ["a", "b"], "preselect": None, "subtitle": None}
    ]
    assert (project / "b.txt").read_text() == "b\n" and not (project / "a.txt").exists()
    assert not manual.fork_active
    assert manual.merged_messages and manual.history[-len(manual.merged_messages) :] == (
        manual.merged_messages
    )


async def test_cancelling_the_picker_keeps_the_fork_and_every_file(
    project: Path, manual: ChatSession
) -> None:
    ui = AnsweringUI(picks=[None])
    assert await MergeWorkflow(manual, ui).run() is None
    assert ui.notices[-1] == (CANCELLED, "information")
    assert manual.fork_active
    assert not (project / "a.txt").exists() and not (project / "b.txt").exists()


async def test_a_branch_colliding_with_the_parent_is_refused_and_nothing_changes(
    project: Path, manual: ChatSession
) -> None:
    (project / "b.txt").write_text("mine\n")  # the parent wrote b.txt since the fork
    history = list(manual.history)
    ui = AnsweringUI(picks=["pick:b"])
    assert await MergeWorkflow(manual, ui).run() is None
    text, severity = ui.notices[-1]
    assert severity == "error" and text.startswith("merge failed: branch b was not merged: b.txt")
    assert "\n" not in text
    assert (project / "b.txt").read_text() == "mine\n" and not (project / "a.txt").exists()
    assert manual.fork_active and manual.history == history
    # the fork is still there to pick another branch
    result = await MergeWorkflow(manual, AnsweringUI(picks=["pick:a"])).run()
    assert result is not None and (project / "a.txt").read_text() == "a\n"


async def test_judge_verdict_accepted_merges_the_judges_pick(
    project: Path, gated: GatedModel
) -> None:
    session = await _forked(project, gated, "auto_with_fallback")
    _judge_picks(session, "b")
    ui = AnsweringUI(accepts=["accept"])
    try:
        result = await MergeWorkflow(session, ui).run()
    finally:
        await session.aclose()
    assert [v.winner_label for v in ui.verdicts] == ["b"]
    assert ui.pickers == []  # accepting skips the picker
    assert result is not None and result.winner_label == "b"
    assert (project / "b.txt").exists() and not (project / "a.txt").exists()
    assert ui.said("asking the judge")


async def test_overriding_the_verdict_opens_the_picker_on_the_judges_pick(
    project: Path, gated: GatedModel
) -> None:
    session = await _forked(project, gated, "auto_with_fallback")
    _judge_picks(session, "b")
    ui = AnsweringUI(accepts=["override"], picks=["pick:a"])
    try:
        result = await MergeWorkflow(session, ui).run()
    finally:
        await session.aclose()
    [picker] = ui.pickers
    assert picker["preselect"] == "b" and picker["subtitle"] == "b did"
    assert result is not None and result.winner_label == "a"
    assert (project / "a.txt").exists() and not (project / "b.txt").exists()


async def test_cancelling_the_verdict_merges_nothing(project: Path, gated: GatedModel) -> None:
    session = await _forked(project, gated, "auto_with_fallback")
    _judge_picks(session, "a")
    ui = AnsweringUI(accepts=[None])
    try:
        assert await MergeWorkflow(session, ui).run() is None
        assert session.fork_active and ui.pickers == []
        assert ui.notices[-1] == (CANCELLED, "information")
    finally:
        await session.aclose()
    assert not (project / "a.txt").exists()


async def test_a_committed_auto_merge_is_taken_over_without_asking(
    project: Path, gated: GatedModel
) -> None:
    session = await _forked(project, gated, "auto")
    _judge_picks(session, "a")
    ui = AnsweringUI()  # any question would fail: nothing to pop
    result = await MergeWorkflow(session, ui).run()
    assert result is not None and result.winner_label == "a"
    assert ui.verdicts == [] and ui.pickers == []
    assert (project / "a.txt").read_text() == "a\n" and not session.fork_active


async def test_without_a_judge_model_the_user_picks_and_is_told_why(
    project: Path, gated: GatedModel
) -> None:
    session = await _forked(project, gated, "auto_with_fallback")  # no judges, no LLM key
    ui = AnsweringUI(picks=["pick:a"])
    try:
        result = await MergeWorkflow(session, ui).run()
    finally:
        await session.aclose()
    assert any(s == "warning" and "the judge needs a model" in t for t, s in ui.notices)
    assert ui.pickers[0]["preselect"] is None
    assert result is not None and result.winner_label == "a"


async def test_without_a_fork_it_says_so(project: Path, gated: GatedModel) -> None:
    session = ChatSession(project, requested_model=gated.model)
    ui = AnsweringUI()
    assert await MergeWorkflow(session, ui).run() is None
    assert ui.notices == [("no fork is open: /fork first", "warning")]


def test_busy_waits_nest_and_the_innermost_is_shown(project: Path) -> None:
    """One busy state for the app: a screen flow's wait around a session's own."""
    session = ChatSession(project)
    seen: list[str | None] = []
    session.on_busy = seen.append
    with session.busy("merging b"):
        with session.busy("waiting for branch b to finish"):
            assert session.busy_label == "waiting for branch b to finish"
        assert session.busy_label == "merging b"
    assert seen == ["merging b", "waiting for branch b to finish", "merging b", None]
    assert session.busy_label is None
