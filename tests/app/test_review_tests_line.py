"""Issue 17.4 in the TUI: which test command the review runs (configured, or detected and
from which file) is shown by ``/fork diff`` and in the merge picker. Real app, real fork,
real marker files; the picker runs the configured command in the real branches."""

from __future__ import annotations

from pathlib import Path

import pytest
from forkdeck.chat.screen import ChatScreen
from forkdeck.merge.merge_picker import MergePickerModal
from forkdeck.review.detected_tests import describe_tests, detect_for
from forkdeck.review.diff_explorer import DiffExplorerScreen
from rich.text import Text
from textual.widgets import Static

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


def _text(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def test_tests_line_says_what_and_from_where(tmp_path: Path) -> None:
    assert detect_for(None, tmp_path) is None
    assert describe_tests(None) == "tests: none detected (set [review] test_command)"
    (tmp_path / "Cargo.toml").write_text('[package]\nname = "x"\n')
    assert describe_tests(detect_for(None, tmp_path)) == (
        "tests: `cargo test --no-fail-fast` (detected from Cargo.toml)"
    )
    assert describe_tests(detect_for("make check", tmp_path)) == (
        "tests: `make check` (from [review] test_command)"
    )
    assert detect_for("", tmp_path) is None  # "" turns the tests off, as for the judge


async def test_fork_diff_shows_the_detected_test_command(
    project: Path, gated: GatedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no external diff tool: the explorer opens
    (project / "pytest.ini").write_text("[pytest]\n")
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = _chat(app)
        await open_done_fork(pilot)
        await submit(pilot, "/fork diff")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffExplorerScreen), what="explorer")
        line = _text(app.screen.query_one("#diff-explorer-tests", Static))
        assert line.startswith("tests: `") and line.endswith("(detected from pytest.ini)")
        assert "pytest -q" in line
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, ChatScreen), what="back to chat")
        assert line in "\n".join(chat.messages.transcript())


async def test_merge_picker_shows_the_configured_command_and_runs_it(
    project: Path, gated: GatedModel
) -> None:
    (project / "pytest.ini").write_text("[pytest]\n")  # configured wins over detected
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir()
    config.write_text('[review]\ntest_command = "test -f a.txt"\n')
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await open_done_fork(pilot)
        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        picker = app.screen
        assert isinstance(picker, MergePickerModal)
        assert _text(picker.query_one("#merge-picker-tests", Static)) == (
            "tests: `test -f a.txt` (from [review] test_command)"
        )
        await wait_for(pilot, lambda: len(picker.branch_tests) == 2, what="the test runs")
        assert picker.branch_tests["a"].startswith("tests ✓")
        assert picker.branch_tests["b"].startswith("tests ✗")
        await pilot.press("escape")
