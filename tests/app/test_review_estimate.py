"""Issue 17.5 in the TUI: the ``/fork`` picker shows each row's estimated cost and the
total before Enter (``coord.estimate`` over the chat's history), updates them as rows,
models and budgets change, and flags a budget below its row's estimate. Real app, real
Agent on a FunctionModel, real genai-prices prices."""

from __future__ import annotations

from pathlib import Path

from forkdeck.fork.fork_picker import ForkPickerModal
from forkdeck.review.fork_estimate import RowValues, lenient_specs
from rich.text import Text
from textual.widgets import Input, Static

from branching_core.fork.estimate import estimate_fork
from tests.app.conftest import TERMINAL, GatedModel, make_app, parent_turn, ready, submit, wait_for
from tests.app.fixtures_merge import ScreenHost

PRICED = "anthropic:claude-sonnet-4-5"


def _text(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def test_half_typed_rows_still_give_specs() -> None:
    specs = lenient_specs(
        [
            RowValues("", "", "anthropic:", "abc"),
            RowValues("a", "go", PRICED, "$0.5"),
            RowValues("a", "", "offline", "-1"),
        ]
    )
    assert [(s.label, s.model, s.budget_usd) for s in specs] == [
        ("row1", None, None),
        ("a", PRICED, 0.5),
        ("a-3", "offline", None),
    ]


async def test_picker_estimates_rows_and_total_and_flags_a_low_budget(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await parent_turn(pilot, "a first turn, so the parent history has some weight")
        await submit(pilot, "/fork")
        await wait_for(pilot, lambda: isinstance(app.screen, ForkPickerModal), what="picker")
        picker = app.screen
        assert isinstance(picker, ForkPickerModal)
        await wait_for(
            pilot,
            lambda: picker.estimate is not None,
            what=lambda: _text(picker.query_one("#estimate-total", Static)),
        )
        assert picker.estimate is not None
        assert picker.estimate.history_tokens > 0
        # FunctionModel: no price; the tokens are shown, never $0 (issue 24.11)
        assert _text(picker.query_one("#est-1", Static)).endswith(" tok")
        first_total = _text(picker.query_one("#estimate-total", Static))
        assert first_total.startswith("estimated: ~") and " tok in total" in first_total
        assert "$" not in first_total

        picker.query_one("#model-1", Input).value = PRICED
        picker.query_one("#budget-1", Input).value = "0.000001"
        await wait_for(
            pilot,
            lambda: _text(picker.query_one("#est-1", Static)).endswith(" !"),
            what="the flag",
        )
        estimate = picker.estimate
        assert estimate is not None
        first = estimate.branches[0]
        assert first.model == PRICED and first.cost_usd is not None and first.over_budget
        total = _text(picker.query_one("#estimate-total", Static))
        assert "budget below the estimate: a" in total
        assert total.startswith("estimated: ~$")  # row b's price is unknown: its tokens
        assert " tok at unknown prices (1 branch)" in total and "$0.0000" not in total
        picker.query_one("#label-1", Input).value = "fast"  # the flagged row is named
        await wait_for(
            pilot,
            lambda: (
                "below the estimate: fast" in _text(picker.query_one("#estimate-total", Static))
            ),
            what="the renamed row",
        )

        # the same figures as the engine's coord.estimate over the chat's history
        specs = lenient_specs(
            [RowValues("fast", "", PRICED, "0.000001"), RowValues("b", "", "", "")]
        )
        direct = app.session.new_coordinator().estimate(specs, app.session.history)
        assert direct.branches[0].cost_usd == first.cost_usd

        await pilot.press("ctrl+n")  # a third row: estimated too
        await wait_for(
            pilot,
            lambda: picker.estimate is not None and len(picker.estimate.branches) == 3,
            what="three rows",
        )
        assert _text(picker.query_one("#est-3", Static)).endswith(" tok")
        picker.query_one("#budget-1", Input).value = "100"
        await wait_for(
            pilot,
            lambda: not _text(picker.query_one("#est-1", Static)).endswith("!"),
            what="the flag gone",
        )
        assert "below the estimate" not in _text(picker.query_one("#estimate-total", Static))
        await pilot.press("escape")


async def test_an_estimate_arriving_while_the_picker_closes_is_dropped() -> None:
    """Regression: an estimate whose worker thread returned while Enter was dismissing the
    picker (its widgets already pruned, the screen not yet) crashed the app with
    ``NoMatches('#estimate-total')``. The pruned state is made here directly."""
    app = ScreenHost(
        lambda: ForkPickerModal(
            1,
            cursor_blink=False,
            estimator=lambda specs, agg: estimate_fork(specs, [], default_model=PRICED),
        )
    )
    async with app.run_test() as pilot:
        picker = app.screen
        assert isinstance(picker, ForkPickerModal)
        for _ in range(200):
            if picker.estimate is not None:
                break
            await pilot.pause(0.02)
        estimate = picker.estimate
        assert estimate is not None
        await picker.query_one("#dialog").remove()  # as a dismissal prunes the children
        picker.show_estimate(estimate)  # raised NoMatches before
        assert picker.estimate is estimate
