"""Combine and process view in the diff explorer, driven by Pilot on a real fork.

The fork is ``run_fork``'s: three FunctionModel branches in a real overlay workspace
(``a`` and ``b`` both rewrite line 1 of ``src/app.py``; ``c`` writes a binary ``logo.bin``;
``b`` deletes ``README.txt``). Hunks come from the branches' real files, conflicts and the
merge from the real engine (``merge_or_select("combine", ...)``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from forkdeck.review.combine_state import LiveCombiner
from forkdeck.review.diff_explorer import DiffExplorerScreen
from forkdeck.review.process_view import ProcessViewModal
from rich.text import Text
from textual.widgets import Static

from tests.app.fixtures_merge import ForkRun, ScreenHost, run_fork

SIZE = (140, 40)


class NoticeHost(ScreenHost):
    def __init__(self, factory: Any) -> None:
        super().__init__(factory)
        self.notices: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:
        self.notices.append(message)
        super().notify(message, **kwargs)


@pytest.fixture
async def fork_run(tmp_path: Path) -> AsyncIterator[ForkRun]:
    run = await run_fork(tmp_path / "proj")
    yield run
    await run.coordinator.aclose()


def _explorer(run: ForkRun, path: str, *, merge: bool = True) -> DiffExplorerScreen:
    coordinator = run.coordinator

    async def do_merge(selection: dict[str, Any], base: str | None) -> Any:
        return await coordinator.merge_or_select("combine", selection=selection, base=base)

    return DiffExplorerScreen(
        run.report,
        initial_path=path,
        combiner=LiveCombiner(coordinator, do_merge if merge else None),
        process=coordinator.process_report,
    )


def _text(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


async def _until(pilot: Any, check: Any) -> None:
    for _ in range(200):
        await pilot.pause(0.02)
        if check():
            return
    raise AssertionError("condition not reached")


async def test_take_hunks_and_files_then_merge_the_combination(fork_run: ForkRun) -> None:
    app = NoticeHost(lambda: _explorer(fork_run, "src/app.py"))
    project = fork_run.project
    async with app.run_test(size=SIZE) as pilot:
        explorer = app.screen
        assert isinstance(explorer, DiffExplorerScreen)
        assert explorer.slots == [("a", 0), ("b", 0)]  # the engine's hunks, one per branch
        body = _text(explorer.query_one("#diff-branches", Static))
        assert "▶ @@ a#0 · parent lines 1-1 @@" in body and "+VALUE = 2" in body
        await pilot.press("j", "h")  # b's hunk
        assert explorer.selection.as_engine() == {"src/app.py": ["b:0"]}
        explorer.show_path("logo.bin")
        await pilot.pause()
        await pilot.press("f")  # c's binary file, whole
        explorer.show_path("README.txt")
        await pilot.pause()
        await pilot.press("f")  # b deleted it
        panel = explorer.query_one("#combine-result", Static)
        await _until(pilot, lambda: explorer.preview is not None)
        shown = _text(panel)
        assert "src/app.py\n  ← hunks b#0" in shown
        assert "logo.bin\n  ← c (whole file)" in shown
        assert "README.txt\n  ← b (whole file)" in shown
        assert "history from: b" in shown and "m: merge this combination" in shown
        assert (project / "README.txt").exists()  # nothing lands before m
        await pilot.press("m")
        await _until(pilot, lambda: bool(app.results))
    result = app.results[0]
    assert result.action == "combine" and result.winner_label == "b"
    assert (project / "src" / "app.py").read_text() == "VALUE = 3\n"
    assert (project / "logo.bin").read_bytes() == b"BIN\x00\x01\x02"
    assert not (project / "README.txt").exists()
    assert not (project / "notes.md").exists()  # not chosen: not taken
    note = result.history_after_merge[-1].parts[0].content
    assert "- src/app.py: hunks b#0" in note and "- logo.bin: from c" in note


async def test_overlapping_hunks_show_the_engines_conflict_and_m_refuses(
    fork_run: ForkRun,
) -> None:
    app = NoticeHost(lambda: _explorer(fork_run, "src/app.py"))
    async with app.run_test(size=SIZE) as pilot:
        explorer = app.screen
        assert isinstance(explorer, DiffExplorerScreen)
        await pilot.press("h", "j", "h")
        await _until(pilot, lambda: explorer.preview is not None)
        assert explorer.preview is not None
        assert explorer.preview.conflicts == [
            "src/app.py: hunk a#0 (lines 1-1) overlaps hunk b#0 (lines 1-1)"
        ]
        assert "1 conflict(s)" in _text(explorer.query_one("#combine-result", Static))
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, DiffExplorerScreen)  # still open, nothing merged
        assert "conflicts" in app.notices[-1]
        await pilot.press("h")  # b's hunk again: dropped, no more conflict
        await _until(pilot, lambda: explorer.preview is not None)
        assert explorer.selection.as_engine() == {"src/app.py": ["a:0"]}
        assert explorer.preview is not None and not explorer.preview.conflicts
    assert app.results == []
    assert (fork_run.project / "src" / "app.py").read_text() == "VALUE = 1\n"
    assert not fork_run.coordinator.is_resolved


async def test_binary_file_is_refused_per_hunk_but_taken_per_file(fork_run: ForkRun) -> None:
    app = NoticeHost(lambda: _explorer(fork_run, "logo.bin"))
    async with app.run_test(size=SIZE) as pilot:
        explorer = app.screen
        assert isinstance(explorer, DiffExplorerScreen)
        assert explorer.slots == [("c", None)]
        await pilot.press("h")
        assert app.notices[-1].startswith("logo.bin: ") and "per file (f)" in app.notices[-1]
        assert "\n" not in app.notices[-1]  # one line
        assert explorer.selection.choices == {}
        await pilot.press("f")
        assert explorer.selection.as_engine() == {"logo.bin": "c"}
        assert "✓ whole file taken" in _text(explorer.query_one("#diff-branches", Static))
        await pilot.press("x")
        assert explorer.selection.choices == {}


async def test_without_a_merge_the_combination_is_preview_only(fork_run: ForkRun) -> None:
    app = NoticeHost(lambda: _explorer(fork_run, "src/app.py", merge=False))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("m")
        assert app.notices[-1].startswith("no live fork here")
        await pilot.press("h", "m")
        await pilot.pause()
        assert isinstance(app.screen, DiffExplorerScreen)
    assert not fork_run.coordinator.is_resolved


async def test_p_shows_each_branchs_tool_calls_aligned(fork_run: ForkRun) -> None:
    app = NoticeHost(lambda: _explorer(fork_run, "src/app.py"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ProcessViewModal)
        report = modal.report
        assert [s.tool for s in report.steps["a"]] == ["write_file", "write_file"]
        assert [s.tool for s in report.steps["c"]] == ["write_file", "run_command"]
        assert report.diverged_at == 0  # a and b wrote different contents at step 1
        assert "diverged at step 1" in _text(modal.query_one("#process-divergence", Static))
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DiffExplorerScreen)
