"""Snapshots of issue 17's TUI states: combine in the diff explorer (hunks taken, an
overlapping-hunk conflict, a binary file taken whole), the process view, and the merge
picker's detected test command, and the /fork picker's cost estimate.

Fixed data only (``fixed_report`` and reports/steps built here), a fixed terminal size.
Update with ``pytest tests/app/test_snapshots_review.py --snapshot-update``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from forkdeck.fork.fork_picker import ForkPickerModal
from forkdeck.merge.merge_picker import MergePickerModal
from forkdeck.review.combine_state import LiveCombiner
from forkdeck.review.diff_explorer import DiffExplorerScreen
from forkdeck.review.process_view import ProcessViewModal
from textual.app import App
from textual.pilot import Pilot

from branching_core.config import Settings
from branching_core.fork.estimate import estimate_fork
from branching_core.review.detect_tests import DetectedTestCommand
from branching_core.review.process_report import ProcessReport, ToolStep
from branching_core.review.types import BranchChange, BranchDiffReport, DiffSummary, PathDiff
from tests.app.fixtures_merge import ScreenHost, fixed_report, fixed_statuses, run_fork

SIZE = (120, 36)


def test_explorer_combine_hunks_taken(snap_compare: Any) -> None:
    """alpha's hunk and gamma's first hunk taken; the panel lists them and the base."""
    app = ScreenHost(lambda: DiffExplorerScreen(fixed_report(), initial_path="src/app.py"))
    assert snap_compare(app, press=["h", "j", "j", "h"], terminal_size=SIZE)


def test_explorer_combine_at_80x24(snap_compare: Any) -> None:
    """On a small terminal the panel takes a share of the width; the key hint wraps."""
    app = ScreenHost(lambda: DiffExplorerScreen(fixed_report(), initial_path="src/app.py"))
    assert snap_compare(app, press=["h", "j", "j", "h"], terminal_size=(80, 24))


def test_explorer_combine_binary_taken_whole(snap_compare: Any) -> None:
    app = ScreenHost(lambda: DiffExplorerScreen(fixed_report(), initial_path="assets/logo.png"))
    assert snap_compare(app, press=["f"], terminal_size=SIZE)


def _same_line_report() -> BranchDiffReport:
    parent = "timeout = 10\nretries = 1\n"
    news = {"x": "timeout = 30\nretries = 1\n", "y": "timeout = 5\nretries = 1\n"}

    def change(bid: str) -> BranchChange:
        diff = "".join(
            difflib.unified_diff(
                parent.splitlines(True), news[bid].splitlines(True), "a/cfg.py", "b/cfg.py"
            )
        )
        return BranchChange(bid, bid, "cfg.py", "modified", new_content=news[bid], _diff=diff)

    entry = PathDiff(
        "cfg.py", parent, {"x": change("x"), "y": change("y")}, "split", parent_exists=True
    )
    summary = DiffSummary(total_paths_touched=1, split_paths=1, agreement_score=0.0)
    return BranchDiffReport("fork-cfg", [entry], summary, labels={"x": "x", "y": "y"})


def test_explorer_combine_overlapping_hunks(snap_compare: Any) -> None:
    app = ScreenHost(lambda: DiffExplorerScreen(_same_line_report(), initial_path="cfg.py"))
    assert snap_compare(app, press=["h", "j", "h"], terminal_size=SIZE)


def _process_report() -> ProcessReport:
    def step(i: int, tool: str, args: str, status: str, s: float, usd: float) -> ToolStep:
        return ToolStep(i, tool, args, f"{tool}:{args}", status, s, usd)

    report = ProcessReport()
    report.steps["alpha"] = [
        step(0, "read_file", "path='src/app.py'", "success", 0.2, 0.0011),
        step(
            1,
            "write_file",
            "path='src/app.py', content='def handler(x):\\n ...'",
            "success",
            0.4,
            0.0032,
        ),
        step(2, "run_command", "command='pytest -q'", "success", 3.1, 0.0009),
    ]
    report.steps["beta"] = [
        step(0, "read_file", "path='src/app.py'", "success", 0.2, 0.0012),
        step(1, "write_file", "path='src/app.py', content='VALUE = 2'", "success", 0.3, 0.0021),
        step(2, "run_command", "command='pytest -q'", "failed", 2.7, 0.0008),
        step(3, "run_command", "command='pytest -q -x'", "retried", 2.9, 0.0008),
    ]
    report.steps["gamma"] = [
        step(0, "read_file", "path='src/app.py'", "success", 0.1, 0.0010),
    ]
    report.diverged_at = 1
    return report


def test_process_view(snap_compare: Any) -> None:
    app = ScreenHost(lambda: ProcessViewModal(_process_report()))
    assert snap_compare(app, terminal_size=SIZE)


def test_process_view_of_text_only_branches(snap_compare: Any) -> None:
    """Issue 24.12: branches that only talked show their prompts, requests, steers,
    ``!cmd``s and IDE edits (the view was empty: "no branch has called a tool yet")."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from branching_core.review.process_report import ProcessReport, branch_moments

    def talk(prompt: str, answer: str, steer: str | None = None) -> list[Any]:
        history: list[Any] = [
            ModelRequest(parts=[UserPromptPart(prompt)]),
            ModelResponse(parts=[TextPart(answer)]),
        ]
        if steer:
            history += [
                ModelRequest(parts=[UserPromptPart(steer)]),
                ModelResponse(parts=[TextPart("ok, shorter")]),
            ]
        return history

    report = ProcessReport(
        steps={"terse": [], "chatty": []},
        moments={
            "terse": branch_moments(
                talk("answer in one line", "Use a dict.", steer="even shorter"),
                commands=["pytest -q"],
            ),
            "chatty": branch_moments(
                talk("explain the options", "There are three ways: a dict, a list, a trie."),
                edits=["notes.md"],
            ),
        },
    )
    app = ScreenHost(lambda: ProcessViewModal(report))
    assert snap_compare(app, terminal_size=SIZE)


def test_merge_picker_with_detected_test_command(snap_compare: Any) -> None:
    detected = DetectedTestCommand("pytest -q", "pyproject.toml", "pytest")
    tests = {"alpha": "tests ✓ 12/12 passed", "beta": "tests ✗ 9/12 passed, 3 failed"}
    app = ScreenHost(
        lambda: MergePickerModal(
            fixed_report(), fixed_statuses(), branch_tests=tests, detected_tests=detected
        )
    )
    assert snap_compare(app, terminal_size=SIZE)


class EstimatePickerApp(App[None]):
    """The /fork picker with the engine's estimate (no history: the default request count)."""

    def on_mount(self) -> None:
        settings = Settings(
            model="anthropic:claude-sonnet-4-5",
            per_branch_budget_usd=0.05,
            aggregate_budget_usd=0.1,
            branch_models={2: "anthropic:claude-opus-4-6"},
        )

        def estimator(specs: list[Any], aggregate: float | None) -> Any:
            return estimate_fork(
                specs, [], default_model=settings.model, aggregate_budget_usd=aggregate
            )

        self.push_screen(ForkPickerModal(3, settings, cursor_blink=False, estimator=estimator))


def test_fork_picker_with_estimate(snap_compare: Any) -> None:
    async def estimated(pilot: Pilot[None]) -> None:
        picker = pilot.app.screen
        assert isinstance(picker, ForkPickerModal)
        for _ in range(200):
            if picker.estimate is not None:
                break
            await pilot.pause(0.02)
        assert picker.estimate is not None and picker.estimate.over_budget
        await pilot.pause()

    assert snap_compare(EstimatePickerApp(), terminal_size=(100, 30), run_before=estimated)


def test_explorer_combine_on_a_live_fork(snap_compare: Any, tmp_path: Path) -> None:
    """A real fork (``run_fork``: labels, paths and contents fixed): the engine's preview
    says the combination can be merged (``m``). The fork is closed once drawn."""

    async def combine(pilot: Pilot[None]) -> None:
        run = await run_fork(tmp_path / "proj")
        coordinator = run.coordinator

        async def merge(selection: dict[str, Any], base: str | None) -> Any:
            return await coordinator.merge_or_select("combine", selection=selection, base=base)

        screen = DiffExplorerScreen(
            run.report, combiner=LiveCombiner(coordinator, merge), initial_path="src/app.py"
        )
        await pilot.app.push_screen(screen)
        await pilot.press("j", "h")
        screen.show_path("notes.md")
        await pilot.press("f")
        screen.show_path("logo.bin")
        await pilot.press("f")
        screen.show_path("src/app.py")
        for _ in range(200):
            if screen.preview is not None:
                break
            await pilot.pause(0.02)
        assert screen.preview is not None and screen.preview.base_label == "a"
        await coordinator.aclose()
        await pilot.pause()

    assert snap_compare(App[None](), terminal_size=SIZE, run_before=combine)
