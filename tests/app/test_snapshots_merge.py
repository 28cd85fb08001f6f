"""Snapshots of the merge UI: picker (three branches), judge acceptance, diff explorer.

Fixed data only (``fixed_report``: fixed ids, labels and contents), a fixed terminal size,
and no text inputs on these screens (so no blinking cursor), so the SVGs are stable.
Update with ``pytest tests/app/test_snapshots_merge.py --snapshot-update``.
"""

from __future__ import annotations

from typing import Any

from forkdeck.merge.merge_acceptance import MergeAcceptanceModal
from forkdeck.merge.merge_picker import MergePickerModal
from forkdeck.review.diff_explorer import DiffExplorerScreen
from forkdeck.review.merge_diff import DiffPaths

from tests.app.fixtures_merge import ScreenHost, fixed_outcome, fixed_report, fixed_statuses

SIZE = (120, 36)


def test_merge_picker_three_branches(snap_compare: Any) -> None:
    app = ScreenHost(lambda: MergePickerModal(fixed_report(), fixed_statuses()))
    assert snap_compare(app, press=["right"], terminal_size=SIZE)


def test_merge_picker_digit_waits_for_confirmation(snap_compare: Any) -> None:
    """Issue 24.14: ``2`` chose beta and says what merging it does; nothing merged yet."""
    app = ScreenHost(lambda: MergePickerModal(fixed_report(), fixed_statuses()))
    assert snap_compare(app, press=["2"], terminal_size=SIZE)


def test_merge_picker_preselected_by_judge(snap_compare: Any) -> None:
    outcome = fixed_outcome()
    verdict = outcome.verdict
    assert verdict is not None
    app = ScreenHost(
        lambda: MergePickerModal(
            fixed_report(),
            fixed_statuses(),
            preselect="gamma",
            subtitle=f"Judge picked alpha: {verdict.rationale}",
        )
    )
    assert snap_compare(app, terminal_size=SIZE)


def test_merge_acceptance(snap_compare: Any) -> None:
    report = fixed_report()
    app = ScreenHost(lambda: MergeAcceptanceModal(fixed_outcome(report), statuses=fixed_statuses()))
    assert snap_compare(app, terminal_size=SIZE)


def test_diff_explorer(snap_compare: Any) -> None:
    app = ScreenHost(lambda: DiffExplorerScreen(fixed_report(), initial_path="src/app.py"))
    assert snap_compare(app, terminal_size=SIZE)


def test_diff_explorer_edited_by_you(snap_compare: Any) -> None:
    """17.2: a path the user edited in branch alpha's mirror directory is marked."""
    paths = DiffPaths(parent=None, user_edited={"src/app.py": ("alpha",)})
    app = ScreenHost(
        lambda: DiffExplorerScreen(fixed_report(), paths=paths, initial_path="src/app.py")
    )
    assert snap_compare(app, terminal_size=SIZE)


def test_diff_explorer_binary(snap_compare: Any) -> None:
    app = ScreenHost(lambda: DiffExplorerScreen(fixed_report(), initial_path="assets/logo.png"))
    assert snap_compare(app, terminal_size=SIZE)


def test_merge_picker_at_80x24_with_branch_tests(snap_compare: Any) -> None:
    """Issues 13.21 and 13.24: at 80x24 the key hint wraps instead of being cut; each
    column shows its branch's test_command result."""
    tests = {"alpha": "tests ✓ 12/12 passed", "beta": "tests ✗ 9/12 passed, 3 failed"}
    app = ScreenHost(
        lambda: MergePickerModal(fixed_report(), fixed_statuses(), branch_tests=tests)
    )
    assert snap_compare(app, terminal_size=(80, 24))
