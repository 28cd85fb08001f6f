"""Merge UI driven by Pilot on a real fork: picker keys, diff tool launches, explorer, judge.

Every report here comes from a real ``ForkCoordinator`` run (FunctionModel agents writing
files in a real overlay workspace) through the real ``build_diff_report``; the diff tool is
a real script run by the real ``EditorDetector`` from ``FORKDECK_DIFFTOOL``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from forkdeck.merge.merge_acceptance import MergeAcceptanceModal, MergeAcceptanceWidget
from forkdeck.merge.merge_picker import BranchColumn, MergePickerModal
from forkdeck.review.diff_explorer import DiffExplorerScreen
from forkdeck.review.merge_diff import DiffPaths
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from rich.text import Text
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Static, Tree

from branching_core import MergeAction
from branching_core.fork.types import MergeStrategy
from branching_core.review.resolver import resolve
from branching_core.review.types import ResolveOutcome
from tests.app.fixtures_merge import (
    HOSTILE_NAME,
    ForkRun,
    ScreenHost,
    recording_difftool,
    run_fork,
)

SIZE = (140, 40)


class NoticeHost(ScreenHost):
    """``ScreenHost`` that also keeps the text of every notification."""

    def __init__(self, factory: Any) -> None:
        super().__init__(factory)
        self.notices: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:
        self.notices.append(message)
        super().notify(message, **kwargs)


@pytest.fixture
async def fork_run(tmp_path: Path) -> AsyncIterator[ForkRun]:
    run = await run_fork(tmp_path / "my project")
    yield run
    await run.coordinator.aclose()


@pytest.fixture
def difftool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point FORKDECK_DIFFTOOL at the recording script; run from an empty cwd."""
    template, out = recording_difftool(tmp_path)
    monkeypatch.delenv("PYDANTIC_DEEP_DIFFTOOL", raising=False)
    monkeypatch.setenv("FORKDECK_DIFFTOOL", template)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return out


def _paths(run: ForkRun) -> DiffPaths:
    return DiffPaths.for_coordinator(run.coordinator)


def _picker(run: ForkRun, **kwargs: Any) -> MergePickerModal:
    return MergePickerModal(run.report, run.statuses, paths=_paths(run), **kwargs)


def _text(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def _recorded(out: Path, launch: Any) -> list[list[str]]:
    assert launch is not None and launch.processes, "no diff tool process was started"
    for proc in launch.processes:
        assert proc.wait(timeout=20) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


# ----------------------------------------------------------------------------- picker


async def test_number_key_picks_branch_and_the_pick_merges(fork_run: ForkRun) -> None:
    """Issue 24.14: a digit chooses and says what the merge will do; it merges only once
    confirmed (Enter, or the digit again); Esc takes the choice back, the picker stays."""
    app = ScreenHost(lambda: _picker(fork_run))
    async with app.run_test(size=SIZE) as pilot:
        picker = app.screen
        assert isinstance(picker, MergePickerModal)
        confirm = picker.query_one("#merge-picker-confirm", Static)
        assert not confirm.display
        await pilot.press("2")
        await pilot.pause()
        assert app.screen is picker and app.results == []  # not merged yet
        assert picker.highlighted_label == "b" and picker.armed == "b"
        line = _text(confirm)
        assert confirm.display and line.startswith("Merge b? ")
        assert "land in the workspace" in line and "Enter or 2 again: merge" in line
        await pilot.press("escape")  # back to choosing: nothing merged, still open
        await pilot.pause()
        assert app.screen is picker and picker.armed is None and not confirm.display
        await pilot.press("3", "2")  # another digit re-chooses, it does not confirm
        await pilot.pause()
        assert app.screen is picker and picker.armed == "b" and app.results == []
        await pilot.press("2")  # the same digit again: merge
        await pilot.pause()
    assert app.results == [MergeAction.pick("b")]
    # The result is exactly what the coordinator takes: b's files land in the parent.
    result = await fork_run.coordinator.merge_or_select(app.results[0])
    assert result.winner_label == "b"
    assert (fork_run.project / "src" / "app.py").read_text() == "VALUE = 3\n"
    assert not (fork_run.project / "README.txt").exists()
    assert not (fork_run.project / "notes.md").exists()


async def test_columns_show_label_state_and_diff_head(fork_run: ForkRun) -> None:
    app = ScreenHost(lambda: _picker(fork_run))
    async with app.run_test(size=SIZE):
        columns = {c.label: c for c in app.screen.query(BranchColumn)}
        assert list(columns) == ["a", "b", "c"]
        header = _text(columns["b"].query_one(".merge-column-header", Static))
        assert header == "2  b  ✓ done"
        meta = _text(columns["b"].query_one(".merge-column-meta", Static))
        assert meta == "$? · 3 files: 2M 1D"  # FunctionModel has no price: "$?", not "$0"
        head = columns["b"].query_one(".merge-column-diff-text", Static).content
        assert isinstance(head, Text)
        lines = head.plain.splitlines()
        assert f"M {HOSTILE_NAME}" in lines and "D README.txt" in lines
        assert "+VALUE = 3" in lines and "-VALUE = 1" in lines
        # +/- colouring: the added line is green, the removed one red.
        styles = {head.plain[span.start : span.end]: str(span.style) for span in head.spans}
        assert styles["+VALUE = 3"] == "green" and styles["-VALUE = 1"] == "red"
        c_head = columns["c"].query_one(".merge-column-diff-text", Static).content
        assert isinstance(c_head, Text) and "[binary · 6 bytes" in c_head.plain


async def test_arrows_move_highlight_and_enter_picks(fork_run: ForkRun) -> None:
    app = ScreenHost(lambda: _picker(fork_run))
    async with app.run_test(size=SIZE) as pilot:
        modal = app.screen
        assert isinstance(modal, MergePickerModal)
        assert modal.highlighted_label == "a"
        await pilot.press("right", "right", "right", "left")  # clamps at the last column
        assert modal.highlighted_label == "b"
        highlighted = [c.label for c in modal.query(BranchColumn) if c.has_class("-highlighted")]
        assert highlighted == ["b"]
        await pilot.click("#merge-column-2")  # the mouse highlights too
        assert modal.highlighted_label == "c"
        await pilot.press("left")
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [MergeAction.pick("b")]


async def test_escape_returns_none_and_nothing_merges(fork_run: ForkRun) -> None:
    app = ScreenHost(lambda: _picker(fork_run))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]
    assert not fork_run.coordinator.is_resolved
    assert (fork_run.project / "src" / "app.py").read_text() == "VALUE = 1\n"


async def test_preselect_and_subtitle_for_override(fork_run: ForkRun) -> None:
    app = ScreenHost(
        lambda: _picker(fork_run, preselect="c", subtitle="judge: [c] keeps the notes")
    )
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, MergePickerModal)
        assert app.screen.highlighted_label == "c"
        subtitle = app.screen.query_one("#merge-picker-subtitle", Static)
        assert _text(subtitle) == "judge: [c] keeps the notes"  # shown literally, not markup
        await pilot.press("9")  # no ninth branch: refused, modal stays
        await pilot.pause()
        assert isinstance(app.screen, MergePickerModal) and app.results == []
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [MergeAction.pick("c")]


async def test_o_opens_difftool_on_highlighted_branch_whole_tree(
    fork_run: ForkRun, difftool: Path
) -> None:
    paths = _paths(fork_run)
    app = ScreenHost(lambda: _picker(fork_run))
    async with app.run_test(size=SIZE) as pilot:
        modal = app.screen
        assert isinstance(modal, MergePickerModal)
        await pilot.press("right", "o")
        await pilot.pause()
        argv = _recorded(difftool, modal.last_launch)
        assert isinstance(app.screen, MergePickerModal)  # still picking
    assert paths.parent is not None
    # Parent and branch arrive as two separate, absolute arguments (the project dir has
    # a space in its name).
    assert argv == [[str(paths.parent), str(paths.branches["b"])]]
    assert " " in argv[0][0]
    assert app.results == []


async def test_o_with_tui_kind_falls_back_to_the_explorer(
    fork_run: ForkRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYDANTIC_DEEP_DIFFTOOL", raising=False)
    monkeypatch.setenv("FORKDECK_DIFFTOOL", "tui")
    app = ScreenHost(lambda: _picker(fork_run))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right", "right", "o")
        await pilot.pause()
        explorer = app.screen
        assert isinstance(explorer, DiffExplorerScreen)
        # c's first changed path is selected.
        assert explorer.selected_path == "logo.bin"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MergePickerModal)


async def test_unsafe_template_is_refused_with_a_notice(
    fork_run: ForkRun, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PYDANTIC_DEEP_DIFFTOOL", raising=False)
    monkeypatch.setenv("FORKDECK_DIFFTOOL", "sh -c 'diff -r {parent} {branches}'")
    app = NoticeHost(lambda: _picker(fork_run))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, MergePickerModal)
        assert app.screen.last_launch is None
    assert any("unsafe" in n for n in app.notices), app.notices


async def test_d_opens_explorer_and_selecting_paths_shows_their_diffs(fork_run: ForkRun) -> None:
    app = ScreenHost(lambda: _picker(fork_run))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("d")
        await pilot.pause()
        explorer = app.screen
        assert isinstance(explorer, DiffExplorerScreen)
        tree = explorer.query_one("#diff-tree", Tree)
        leaves = _leaf_labels(tree)
        assert leaves[HOSTILE_NAME].startswith(f"{HOSTILE_NAME}  unique  b")
        assert leaves["notes.md"] == "notes.md  unanimous_change  a,c"
        assert leaves["src/app.py"] == "app.py  split  a,b"
        assert explorer.selected_path == HOSTILE_NAME  # first path, selected on open

        # Walk down the tree to src/app.py (past the "src/" directory node).
        for _ in range(10):
            if explorer.selected_path == "src/app.py":
                break
            await pilot.press("down")
        assert explorer.selected_path == "src/app.py"
        body = _text(explorer.query_one("#diff-branches", Static))
        assert "+VALUE = 2" in body and "+VALUE = 3" in body and "unchanged in: c" in body
        title = _text(explorer.query_one("#diff-path-title", Static))
        assert title == "src/app.py  split  touched by a, b"

        await pilot.press("up", "up", "up")  # src/ -> notes.md -> logo.bin
        assert explorer.selected_path == "logo.bin"
        body = _text(explorer.query_one("#diff-branches", Static))
        assert "[binary · 6 bytes · sha256:" in body and "\x00" not in body

        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MergePickerModal)
        await pilot.press("1", "enter")
        await pilot.pause()
    assert app.results == [MergeAction.pick("a")]


def _leaf_labels(tree: Tree[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    stack = list(tree.root.children)
    while stack:
        node = stack.pop()
        if node.data is not None:
            label = node.label
            found[node.data] = label if isinstance(label, str) else label.plain
        stack.extend(node.children)
    return found


async def test_explorer_o_passes_hostile_file_name_as_one_argument(
    fork_run: ForkRun, difftool: Path, tmp_path: Path
) -> None:
    paths = _paths(fork_run)
    app = ScreenHost(
        lambda: DiffExplorerScreen(fork_run.report, paths=paths, initial_path=HOSTILE_NAME)
    )
    async with app.run_test(size=SIZE) as pilot:
        explorer = app.screen
        assert isinstance(explorer, DiffExplorerScreen)
        assert explorer.selected_path == HOSTILE_NAME
        await pilot.press("o")
        await pilot.pause()
        argv = _recorded(difftool, explorer.last_launch)
    assert paths.parent is not None
    assert argv == [[str(paths.parent / HOSTILE_NAME), str(paths.branches["b"] / HOSTILE_NAME)]]
    # Nothing ran the name as shell code: no "pwned" file anywhere.
    assert not [p for p in tmp_path.rglob("pwned")]
    assert not Path("pwned").exists()


async def test_explorer_o_on_created_path_drops_the_missing_parent(
    fork_run: ForkRun, difftool: Path
) -> None:
    paths = _paths(fork_run)
    app = ScreenHost(
        lambda: DiffExplorerScreen(fork_run.report, paths=paths, initial_path="notes.md")
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, DiffExplorerScreen)
        argv = _recorded(difftool, app.screen.last_launch)
    # notes.md is new in the fork: both branches that wrote it, no parent argument.
    assert argv == [[str(paths.branches["a"] / "notes.md"), str(paths.branches["c"] / "notes.md")]]


async def test_difftool_gets_the_live_mirror_when_the_fork_is_materialized(
    tmp_path: Path, difftool: Path
) -> None:
    run = await run_fork(tmp_path / "mirrored project", materialize=True)
    try:
        paths = DiffPaths.for_coordinator(run.coordinator)
        fork_dir = run.project / ".pydantic-deep" / "forks" / str(run.coordinator.fork_id)
        assert paths.parent == fork_dir / "parent"
        assert set(paths.branches) == {"a", "b", "c"}
        assert all(p.parent == fork_dir / "branches" for p in paths.branches.values())

        app = ScreenHost(
            lambda: DiffExplorerScreen(run.report, paths=paths, initial_path="src/app.py")
        )
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("o")
            await pilot.pause()
            assert isinstance(app.screen, DiffExplorerScreen)
            argv = _recorded(difftool, app.screen.last_launch)
        parent, branch_a, branch_b = (Path(p) for p in argv[0])
        assert argv == [
            [
                str(fork_dir / "parent" / "src" / "app.py"),
                str(paths.branches["a"] / "src" / "app.py"),
                str(paths.branches["b"] / "src" / "app.py"),
            ]
        ]
        # The tool really finds the three versions there.
        assert parent.read_text() == "VALUE = 1\n"
        assert branch_a.read_text() == "VALUE = 2\n" and branch_b.read_text() == "VALUE = 3\n"
    finally:
        await run.coordinator.aclose()


def test_diff_paths_prefer_the_fork_mirror(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    mirror = root / ".pydantic-deep" / "forks" / "f1"
    (mirror / "parent").mkdir(parents=True)
    (mirror / "branches" / "a").mkdir(parents=True)
    (mirror / "branches" / "my-label").mkdir(parents=True)
    (mirror / "mirror.json").write_text(
        json.dumps({"branches": [{"label": "my label", "dir": "my-label"}]})
    )
    views = {"a": tmp_path / "view-a", "b": tmp_path / "view-b", "my label": tmp_path / "v"}
    paths = DiffPaths.for_fork(root, "f1", views)
    assert paths.parent == mirror / "parent"
    assert paths.branches == {
        "a": mirror / "branches" / "a",
        "b": tmp_path / "view-b",
        "my label": mirror / "branches" / "my-label",
    }
    bare = DiffPaths.for_fork(root, "other", {"a": tmp_path / "view-a", "b": None})
    assert bare.parent == root and bare.branches == {"a": tmp_path / "view-a"}


# ----------------------------------------------------------------------------- judge


async def _resolve(run: ForkRun, winner: str = "b") -> ResolveOutcome:
    """The real ``resolve`` (auto_with_fallback): a FunctionModel judge naming ``winner``
    and a real test command run in every branch (only b deleted README.txt, so only b
    passes)."""

    def judge(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        args = {
            "winner": winner,
            "confidence": 0.95,
            "rationale": "b [bolder] change",
            "concerns": ["README.txt is gone"],
        }
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    return await resolve(
        run.coordinator,
        MergeStrategy(kind="auto_with_fallback", confidence_threshold=0.5),
        judges=[FunctionModel(judge)],
        test_command="test ! -e README.txt",
    )


async def test_override_opens_picker_preselected_on_judges_pick(fork_run: ForkRun) -> None:
    outcome = await _resolve(fork_run)
    assert outcome.confidence is not None and not outcome.committed

    def after_acceptance(choice: Any) -> None:
        """What the chat screen does: on override, open the picker preselected."""
        app.results.append(choice)
        if choice == "override":
            app.push_screen(
                MergePickerModal.from_outcome(outcome, fork_run.statuses),
                callback=app.results.append,
            )

    app = ScreenHost(
        lambda: MergeAcceptanceModal(outcome, statuses=fork_run.statuses),
        on_result=after_acceptance,
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, MergePickerModal)
        assert picker.highlighted_label == "b"
        subtitle = _text(picker.query_one("#merge-picker-subtitle", Static))
        assert subtitle == f"Judge picked b ({outcome.confidence:.2f}): b [bolder] change"
        await pilot.press("left", "enter")
        await pilot.pause()
    assert app.results == ["override", MergeAction.pick("a")]


@pytest.mark.parametrize(("key", "expected"), [("enter", "accept"), ("o", "override")])
async def test_acceptance_modal_keys(fork_run: ForkRun, key: str, expected: str) -> None:
    outcome = await _resolve(fork_run)
    app = ScreenHost(lambda: MergeAcceptanceModal(outcome, statuses=fork_run.statuses))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(key)
        await pilot.pause()
    assert app.results == [expected]


async def test_acceptance_modal_escape_cancels_and_d_round_trips(fork_run: ForkRun) -> None:
    outcome = await _resolve(fork_run)
    app = ScreenHost(lambda: MergeAcceptanceModal(outcome, statuses=fork_run.statuses))
    async with app.run_test(size=SIZE) as pilot:
        modal = app.screen
        body = _text_of_body(modal)
        assert "Winner: b" in body and f"confidence {outcome.confidence:.2f}" in body
        assert "b [bolder] change" in body and "README.txt is gone" in body
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, DiffExplorerScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is modal and app.results == []  # the verdict survived
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]
    assert not fork_run.coordinator.is_resolved


def _text_of_body(screen: Any) -> str:
    from rich.console import Console

    console = Console(width=100, record=True, color_system=None)
    console.print(screen.query_one(".merge-acceptance-body", Static).content)
    return console.export_text()


async def test_acceptance_shows_tests_per_branch(fork_run: ForkRun) -> None:
    outcome = await _resolve(fork_run)
    app = ScreenHost(lambda: MergeAcceptanceModal(outcome, statuses=fork_run.statuses))
    async with app.run_test(size=SIZE):
        rows = [ln.split() for ln in _text_of_body(app.screen).splitlines() if ln.strip()]
        table = {r[0]: r for r in rows if r[0] in {"a", "b", "c"}}
    assert table["b"] == ["b", "✓", "done", "$?", "1/1", "passed"]
    assert table["a"][-2:] == ["0/1", "passed"] and table["c"][-2:] == ["0/1", "passed"]


async def test_accepting_the_verdict_merges_the_winner(fork_run: ForkRun) -> None:
    outcome = await _resolve(fork_run)
    app = ScreenHost(lambda: MergeAcceptanceModal(outcome, statuses=fork_run.statuses))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == ["accept"]
    # What the caller then does (seed 003): commit the judge's pick.
    result = await fork_run.coordinator.merge_or_select(f"pick:{outcome.winner_label}")
    assert result.winner_label == "b"
    assert (fork_run.project / HOSTILE_NAME).read_text() == "hostile\n"


class WidgetHost(App[None]):
    """Hosts the bare widget and records the messages it posts."""

    def __init__(self, outcome: ResolveOutcome) -> None:
        super().__init__()
        self.outcome = outcome
        self.seen: list[tuple[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield MergeAcceptanceWidget(self.outcome)

    def on_mount(self) -> None:
        self.query_one(MergeAcceptanceWidget).focus()

    def on_merge_acceptance_widget_accepted(self, event: MergeAcceptanceWidget.Accepted) -> None:
        self.seen.append(("accepted", event.winner_label))

    def on_merge_acceptance_widget_override(self, event: MergeAcceptanceWidget.Override) -> None:
        self.seen.append(("override", (event.winner_label, event.rationale)))

    def on_merge_acceptance_widget_show_diff(self, event: MergeAcceptanceWidget.ShowDiff) -> None:
        self.seen.append(("diff", None))

    def on_merge_acceptance_widget_cancelled(self, event: MergeAcceptanceWidget.Cancelled) -> None:
        self.seen.append(("cancelled", None))


async def _press(pilot: Pilot[None], *keys: str) -> None:
    await pilot.press(*keys)
    await pilot.pause()


async def test_acceptance_widget_posts_messages(fork_run: ForkRun) -> None:
    app = WidgetHost(await _resolve(fork_run))
    async with app.run_test(size=SIZE) as pilot:
        await _press(pilot, "enter", "d", "o", "escape")
    assert app.seen == [
        ("accepted", "b"),
        ("diff", None),
        ("override", ("b", "b [bolder] change")),
        ("cancelled", None),
    ]


async def test_acceptance_without_winner_refuses_enter(fork_run: ForkRun) -> None:
    outcome = await _resolve(fork_run, winner="nobody")
    assert outcome.winner_label is None and outcome.fallback_reason
    app = WidgetHost(outcome)
    async with app.run_test(size=SIZE) as pilot:
        await _press(pilot, "enter", "o")
        body = _text_of_body(app.screen)
    assert app.seen == [("override", (None, ""))]
    assert "Winner: none" in body and "the judge could not pick a branch" in body


async def test_empty_report_says_so_everywhere() -> None:
    from branching_core.fork.types import BranchStatus
    from branching_core.review.types import BranchDiffReport, DiffSummary

    report = BranchDiffReport("f-empty", [], DiffSummary(), labels={"i1": "x", "i2": "y"})
    statuses = [BranchStatus("i1", "x", "done"), BranchStatus("i2", "y", "terminated")]
    app = NoticeHost(lambda: MergePickerModal(report, statuses))
    async with app.run_test(size=SIZE) as pilot:
        heads = [_text(s) for s in app.screen.query(".merge-column-diff-text").results(Static)]
        assert heads == ["no file changes", "no file changes"]
        await pilot.press("o")  # no directories were given: a notice, no crash
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, DiffExplorerScreen)
        assert _text(app.screen.query_one("#diff-path-title", Static)) == (
            "the branches changed no files"
        )
        await pilot.press("o", "escape", "2", "enter")
        await pilot.pause()
    assert app.results == [MergeAction.pick("y")]
    assert app.notices == ["no directory known for branch x", "no path selected"]
