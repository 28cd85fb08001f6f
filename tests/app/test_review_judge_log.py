"""Issue 17.6 in the TUI: accepting, overriding or cancelling the judge's pick in the
``/merge`` flow appends that decision to ``.pydantic-deep/judge-log.jsonl``, so
``forkdeck status`` has agreement figures. Real app, real fork, real judge ``Agent``
(TestModel), real log file."""

from __future__ import annotations

from pathlib import Path

import pytest
from forkdeck.merge.merge_acceptance import MergeAcceptanceModal
from forkdeck.merge.merge_picker import MergePickerModal
from pydantic_ai.models.test import TestModel

from branching_core.review.judge_log import judge_agreement, read_judge_log
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


def _app(project: Path, gated: GatedModel, threshold: float) -> object:
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(
        f'[review]\nmerge_strategy = "auto_with_fallback"\nconfidence_threshold = {threshold}\n'
    )
    app = make_app(project, gated.model)
    app.session.judges = [
        TestModel(custom_output_args={"winner": "b", "confidence": 0.9, "rationale": "b wrote it"})
    ]
    return app


# keys after /merge (acceptance modal, then maybe the picker) -> (user_action, chosen, merged)
CASES = {
    "accept": (["enter"], "accepted", "b", True),
    "override": (["o", "PICKER", "1", "enter"], "overrode", "a", True),
    "cancel": (["escape"], "cancelled", None, False),
    "cancel-in-picker": (["o", "PICKER", "escape"], "cancelled", None, False),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_each_decision_on_the_judges_pick_is_logged(
    project: Path, gated: GatedModel, case: str
) -> None:
    keys, action, chosen, merged = CASES[case]
    app = _app(project, gated, 0.0)
    async with app.run_test(size=TERMINAL) as pilot:  # type: ignore[attr-defined]
        await ready(pilot)
        chat = _chat(app)
        await open_done_fork(pilot)
        await submit(pilot, "/merge")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, MergeAcceptanceModal),  # type: ignore[attr-defined]
            what="the verdict",
        )
        assert read_judge_log(project) == []  # nothing before the user decides
        for key in keys:
            if key == "PICKER":
                await wait_for(
                    pilot,
                    lambda: isinstance(app.screen, MergePickerModal),  # type: ignore[attr-defined]
                    what="the picker",
                )
                continue
            await pilot.press(key)
        await wait_for(pilot, lambda: bool(read_judge_log(project)), what="the log line")
        await wait_for(pilot, lambda: chat.fork_area is None or not merged, what="settled")
        assert app.session.fork_active is not merged  # type: ignore[attr-defined]
    entries = read_judge_log(project)
    assert len(entries) == 1
    entry = entries[0]
    assert entry["user_action"] == action and entry["chosen"] == chosen
    assert entry["verdict"] == "b" and entry["confidence"] is not None
    assert "b wrote it" not in entry["goal"] and entry["goal"]  # the branches' steers
    agreement = judge_agreement(project)
    assert (agreement.accepted, agreement.overridden, agreement.cancelled) == (
        int(action == "accepted"),
        int(action == "overrode"),
        int(action == "cancelled"),
    )


async def test_a_pick_below_the_threshold_is_logged_from_the_picker(
    project: Path, gated: GatedModel
) -> None:
    """Below the threshold there is no acceptance modal: the picker opens preselected on
    the judge's pick, and Enter on it is agreement."""
    app = _app(project, gated, 0.99)
    async with app.run_test(size=TERMINAL) as pilot:  # type: ignore[attr-defined]
        await ready(pilot)
        await open_done_fork(pilot)
        await submit(pilot, "/merge")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, MergePickerModal),  # type: ignore[attr-defined]
            what="the picker",
        )
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(read_judge_log(project)), what="the log line")
    [entry] = read_judge_log(project)
    assert (entry["user_action"], entry["chosen"]) == ("accepted", "b")
    assert (project / "b.txt").exists()


def test_a_judges_outcome_is_never_taken_for_a_finished_merge() -> None:
    """A ``ResolveOutcome`` has a ``winner_label`` too; telling them apart by that attribute
    would record a verdict handed back unmerged as an override by combination."""
    from forkdeck.review.combine_flow import is_merge_result
    from forkdeck.review.judge_record import user_decision

    from branching_core.fork.types import MergeResult
    from tests.app.fixtures_merge import fixed_outcome

    outcome = fixed_outcome()
    merged = MergeResult(fork_id="f", action="combine", winner_branch_id="b-1",
                         winner_label="alpha")
    assert not is_merge_result(outcome)
    assert is_merge_result(merged)
    assert not is_merge_result("pick:alpha") and not is_merge_result(None)
    assert user_decision(outcome, merged, fork_open=False) == (
        "overrode", "combine (history from alpha)")
    assert user_decision(outcome, outcome, fork_open=False) is None
