"""Issue 24.6: ``forkdeck demo`` makes a project with a failing test, runs a fork of three
approaches on the offline model through the real tools (one passes), and opens the merge
picker with each branch's test result. Real app, real branches, real sandboxed tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from forkdeck.demo import APPROACHES, DemoApp, make_project
from forkdeck.merge.merge_picker import MergePickerModal
from forkdeck.session import ChatSession

from tests.app.conftest import TERMINAL, chat_screen, wait_for
from tests.support.typed import view_of


async def test_the_demo_forks_three_fixes_and_opens_the_picker_with_results(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path / "demo")
    app = DemoApp(ChatSession(root, requested_model="offline"), cursor_blink=False)
    async with app.run_test(size=TERMINAL) as pilot:
        await wait_for(
            pilot, lambda: isinstance(app.screen, MergePickerModal), timeout=120, what="picker"
        )
        picker = app.screen
        assert isinstance(picker, MergePickerModal)
        assert picker.labels == [a.label for a in APPROACHES]
        await wait_for(
            pilot, lambda: len(picker.branch_tests) == 3, timeout=120, what="test results"
        )
        lines = picker.branch_tests
        passed = [label for label, line in lines.items() if line.startswith("tests ✓")]
        assert passed == ["guard"], lines
        assert all(lines[label].startswith("tests ✗") for label in ("divide", "clamp")), lines
        # the branches really ran: each wrote its own calc.py; the project is untouched
        coordinator = app.session.coordinator
        assert coordinator is not None
        for approach in APPROACHES:
            path = view_of(coordinator.get_branch(approach.label)) / "calc.py"
            assert approach.body in path.read_text()
        assert "(len(values) + 1)" in (root / "calc.py").read_text()
        # the parent turn showed the failing tests first
        transcript = "\n".join(chat_screen(app).messages.transcript())
        assert "read_file calc.py" in transcript or "calc.py" in transcript
        await pilot.press("2")  # guard: chosen, not merged yet
        await pilot.pause()
        assert app.screen is picker
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.session.fork_active, timeout=60, what="merge")
    assert "raise ValueError" in (root / "calc.py").read_text()


def test_demo_refuses_a_directory_with_files(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me\n")
    done = subprocess.run(
        [sys.executable, "-m", "forkdeck", "demo", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"forkdeck demo: {tmp_path} is not a new or empty directory; the demo needs one"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
