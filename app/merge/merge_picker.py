"""MergePickerModal: choose the branch whose work and history become the parent's.

One column per branch (fork order) with its label, state badge, cost and the head of its
diff, so the choice is made on what each branch actually changed rather than on its last
chat message. Keys: ``1``-``9`` choose that branch and say what merging it will do (issue
24.14: a stray digit merged at once); the same digit again or ``Enter`` confirms, ``Esc``
takes the choice back; ``←``/``→`` move the highlight and ``Enter`` picks it; ``o`` opens
the detected external diff tool on the highlighted branch vs. the parent over the whole tree
(``tui`` kind: the diff explorer instead); ``d`` pushes the diff explorer; ``s`` on a
running branch stops it and merges what it has; ``Esc`` cancels.
Dismisses with ``MergeAction.pick(label)`` (what ``ForkCoordinator.merge_or_select``
takes), a :class:`GitChoice` carrying one, or ``None``.

Live, not a snapshot: given the ``coordinator``, the picker listens to its events, so a
branch that finishes (or spends) while the picker is open shows its new state and cost at
once, and its diff head is re-read (in a worker thread) when it reaches a final state.
A ``branch_tests`` mapping (label -> one line, e.g. the configured ``test_command``'s
result in that branch) is shown under each column's header. ``detected_tests`` (issue
17.4) says which command that is and where it came from (``[review] test_command`` or the
file it was detected from), on a line under the title; without a configured command the
detected one is what runs.

The judge's override flow opens this picker with ``preselect=<judge's label>`` and the
verdict's rationale as ``subtitle``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import HorizontalScroll, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Static

from branching_core import BranchingError, MergeAction
from branching_core.fork import BranchStatus
from branching_core.gitops import RepoState, repo_state
from branching_core.review import (
    BranchChange,
    BranchDiffReport,
    DetectedTestCommand,
    ResolveOutcome,
)

from ..review.combine_state import Combiner, LiveCombiner
from ..review.detected_tests import describe_tests
from ..review.diff_explorer import DiffExplorerScreen
from ..review.merge_diff import (
    DiffPaths,
    LaunchOutcome,
    branch_id_of,
    change_counts,
    diff_head,
    format_cost,
    label_order,
    launch_difftool,
    state_badge,
)
from .git_choice import GitChoice

LIVE_STATES = frozenset({"running", "awaiting_approval"})
LIVE_EVENTS = frozenset({"BranchStateChanged", "BranchCostUpdated", "BranchToolResult"})
PICKER_HINT = (
    "1-9 choose · ←/→ move · Enter merge · c merge and commit · b export as branch · "
    "s stop+merge a running one · o diff tool · d explorer · Esc cancel"
)


class _DiffScroll(VerticalScroll, can_focus=False):
    """A column's diff area: scrolls with the mouse but never takes the arrow keys."""


class BranchColumn(Vertical):
    """One branch in the picker: header, change counts, diff head."""

    def __init__(
        self,
        index: int,
        label: str,
        status: BranchStatus | None,
        changes: Sequence[BranchChange],
        tests_line: str | None = None,
        edited: Collection[str] = (),
    ) -> None:
        super().__init__(classes="merge-column", id=f"merge-column-{index}")
        self.index = index
        self.label = label
        self.status = status
        self.changes = list(changes)
        self.tests_line = tests_line
        self.edited = frozenset(edited)
        """Paths the user edited in this branch's mirror ("edited by you")."""

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="merge-column-header")
        yield Static(self._meta(), classes="merge-column-meta")
        tests = Static(Text(self.tests_line or ""), classes="merge-column-tests")
        tests.display = self.tests_line is not None
        yield tests
        with _DiffScroll(classes="merge-column-diff"):
            yield Static(
                diff_head(self.changes, edited=self.edited), classes="merge-column-diff-text"
            )

    def _header(self) -> Text:
        header = Text(f"{self.index + 1} ", style="bold reverse")
        header.append(f" {self.label}", style="bold")
        if self.status is not None:
            header.append(f"  {state_badge(self.status.state)}")
        return header

    def _meta(self) -> str:
        meta = change_counts(self.changes)
        if self.status is not None:
            meta = f"{format_cost(self.status.cost_usd)} · {meta}"
        return meta

    def set_status(self, status: BranchStatus | None) -> None:
        """Show the branch's current state and cost (live picker)."""
        self.status = status
        if self.is_mounted:
            self.query_one(".merge-column-header", Static).update(self._header())
            self.query_one(".merge-column-meta", Static).update(self._meta())

    def set_tests(self, line: str | None) -> None:
        """Show the branch's ``test_command`` result (or hide the line)."""
        self.tests_line = line
        if self.is_mounted:
            for widget in self.query(".merge-column-tests"):
                widget.display = line is not None
                if isinstance(widget, Static):
                    widget.update(Text(line or ""))

    def set_changes(self, changes: Sequence[BranchChange]) -> None:
        """Show the branch's changes as they are now (re-read after it finished)."""
        self.changes = list(changes)
        if not self.is_mounted:
            return
        try:
            meta = self.query_one(".merge-column-meta", Static)
            diff = self.query_one(".merge-column-diff-text", Static)
        except NoMatches:  # the picker is closing (a pick or `s` won the race): nothing to show
            return
        meta.update(self._meta())
        diff.update(diff_head(self.changes, edited=self.edited))

    def on_click(self, event: events.Click) -> None:
        screen = self.screen
        if isinstance(screen, MergePickerModal):
            screen.highlight(self.index)


class MergePickerModal(ModalScreen[Any]):
    """Pick the winning branch; dismisses with ``MergeAction.pick(label)`` (or a
    ``GitChoice`` carrying one) or ``None``, or with the
    ``MergeResult`` of a combined merge made in the diff explorer it opened (``d``).

    ``statuses`` come from ``ForkCoordinator.inspect_branches()`` (order = column order);
    branches only the report knows are appended. ``paths`` says which directories the diff
    tool compares (see ``DiffPaths.for_fork``); ``difftool`` is the ``review.difftool``
    setting; ``env`` defaults to ``os.environ``.
    """

    CSS_PATH = "merge_picker.tcss"

    BINDINGS = [
        *(Binding(str(n), f"pick({n})", show=False) for n in range(1, 10)),
        Binding("left", "move(-1)", "Prev", show=False),
        Binding("right", "move(1)", "Next", show=False),
        Binding("enter", "pick_highlighted", "Pick"),
        Binding("o", "open_tool", "Open diff tool"),
        Binding("d", "explore", "Diff explorer"),
        Binding("s", "stop_and_pick", "Stop + merge"),
        Binding("c", "git_pick('commit')", "Merge and commit"),  # issue 25
        Binding("b", "git_pick('export')", "Export as branch"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(
        self,
        report: BranchDiffReport,
        statuses: Sequence[BranchStatus],
        *,
        difftool: str | None = None,
        paths: DiffPaths | None = None,
        preselect: str | None = None,
        subtitle: str | None = None,
        env: Mapping[str, str] | None = None,
        coordinator: Any = None,
        branch_tests: Mapping[str, str] | None = None,
        test_command: str | None = None,
        combiner: Combiner | None = None,
        detected_tests: DetectedTestCommand | None = None,
    ) -> None:
        super().__init__()
        self.coordinator = coordinator
        self.combiner = combiner
        self.detected_tests = detected_tests
        if test_command is None and detected_tests is not None:
            test_command = detected_tests.command  # not configured: run what was detected
        self.test_command = test_command
        self.branch_tests = dict(branch_tests or {})
        self._remove_listener: Callable[[], None] | None = None
        self._refresh_pending = False
        self._files_dirty = False
        self._reported_final: set[str] = {
            s.label for s in statuses if s.state not in LIVE_STATES
        }
        self.report = report
        self.statuses = {s.label: s for s in statuses}
        self.labels = label_order(report, [s.label for s in statuses])
        self.difftool = difftool
        self.diff_paths = paths
        self.subtitle = subtitle
        self.env = env
        self.highlighted = self.labels.index(preselect) if preselect in self.labels else 0
        self.last_launch: LaunchOutcome | None = None
        self._git_state: RepoState | None = None
        self.armed: str | None = None
        """The branch a digit chose, waiting for its confirmation (None: nothing chosen)."""

    @classmethod
    def from_outcome(
        cls,
        outcome: ResolveOutcome,
        statuses: Sequence[BranchStatus],
        *,
        report: BranchDiffReport | None = None,
        difftool: str | None = None,
        paths: DiffPaths | None = None,
        env: Mapping[str, str] | None = None,
    ) -> MergePickerModal:
        """The override picker: preselected on the judge's pick, its reasoning as subtitle.

        ``report`` defaults to ``outcome.report``; raises ``ValueError`` when neither is set.
        """
        report = report if report is not None else outcome.report
        if report is None:
            raise ValueError("the resolve outcome carries no diff report; pass report=")
        verdict = outcome.verdict
        subtitle = None
        if verdict is not None:
            confidence = (
                outcome.confidence if outcome.confidence is not None else verdict.confidence
            )
            subtitle = f"Judge picked {outcome.winner_label or verdict.winner} ({confidence:.2f})"
            if verdict.rationale:
                subtitle += f": {verdict.rationale}"
        elif outcome.fallback_reason:
            subtitle = f"Judge: {outcome.fallback_reason}"
        return cls(
            report,
            statuses,
            difftool=difftool,
            paths=paths,
            preselect=outcome.winner_label or (verdict.winner if verdict else None),
            subtitle=subtitle,
            env=env,
        )

    @property
    def highlighted_label(self) -> str | None:
        return self.labels[self.highlighted] if self.labels else None

    def _edited_by_you(self, label: str) -> list[str]:
        """Paths the user edited in branch ``label``'s mirror directory (issue 17.2)."""
        edited = self.diff_paths.user_edited if self.diff_paths is not None else {}
        return [path for path, labels in edited.items() if label in labels]

    def _changes(self, label: str) -> list[BranchChange]:
        status = self.statuses.get(label)
        key = status.branch_id if status is not None else branch_id_of(self.report, label)
        return self.report.changes_of(key or label)

    def compose(self) -> ComposeResult:
        with Vertical(id="merge-picker"):
            yield Static(
                f"Merge: pick the winning branch ({len(self.labels)} branches)",
                id="merge-picker-title",
            )
            if self.subtitle:
                yield Static(Text(self.subtitle), id="merge-picker-subtitle")
            if self.detected_tests is not None or self.coordinator is not None:
                yield Static(Text(describe_tests(self.detected_tests)), id="merge-picker-tests")
            git = Static("", id="merge-picker-git")  # issue 25: filled in a worker
            git.display = False
            yield git
            with HorizontalScroll(id="merge-picker-columns", can_focus=False):
                for index, label in enumerate(self.labels):
                    yield BranchColumn(
                        index,
                        label,
                        self.statuses.get(label),
                        self._changes(label),
                        self.branch_tests.get(label, self._tests_pending(label)),
                        edited=self._edited_by_you(label),
                    )
            yield Static("", id="merge-picker-confirm")
            yield Static(PICKER_HINT, id="merge-picker-help")

    def on_resize(self) -> None:
        """Columns share the width, but never narrower than 30 cells: on a narrow terminal
        (80x24) two columns show and the rest scroll, instead of one column taking it all."""
        row = self.query_one("#merge-picker-columns", HorizontalScroll)
        room = row.content_region.width
        if not room or not self.labels:
            return
        width = max(30, room // len(self.labels) - 1)
        for column in self.query(BranchColumn):
            column.styles.width = width

    def on_mount(self) -> None:
        self.highlight(self.highlighted)
        self.run_worker(self._show_git(), group="merge-picker-git", exclusive=True)
        if self.coordinator is not None:
            self._remove_listener = self.coordinator.add_listener(self._on_fork_event)
            self._refresh()  # anything that changed between building and mounting
            if self._tests_wanted():
                self.run_worker(self._run_tests(), group="merge-picker-tests")

    def _tests_wanted(self) -> bool:
        return bool(self.test_command and self.coordinator is not None and not self.branch_tests)

    def _tests_pending(self, label: str) -> str | None:
        return f"tests: running `{self.test_command}`…" if self._tests_wanted() else None

    async def _run_tests(self) -> None:
        """The configured ``test_command`` in every branch (sandboxed, concurrently)."""
        from branching_core.review import run_branch_tests

        from .outcome import test_line

        runtimes = [rt for rt in self.coordinator.branches.values() if rt.ws_branch is not None]
        try:
            results = await run_branch_tests(runtimes, self.test_command or "")
        except Exception as exc:
            lines = {rt.label: f"tests: could not run ({exc})" for rt in runtimes}
        else:
            lines = {r.label: test_line(r) for r in results.values()}
        self.branch_tests = lines
        for column in self.query(BranchColumn):
            column.set_tests(lines.get(column.label))

    def on_unmount(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None

    # ------------------------------------------------------------------ live

    def _on_fork_event(self, event: Any) -> None:
        # Called by the coordinator from a branch task: coalesce, refresh on our loop turn.
        name = type(event).__name__
        if name not in LIVE_EVENTS:
            return
        if name == "BranchToolResult":
            self._files_dirty = True  # a tool may have written files: re-read the diff
        if not self._refresh_pending:
            self._refresh_pending = True
            self.call_later(self._refresh)

    def _refresh(self) -> None:
        """Read every branch's status again; re-read the diff of branches that finished."""
        self._refresh_pending = False
        if self.coordinator is None or not self.is_attached:
            return
        try:
            statuses = {s.label: s for s in self.coordinator.inspect_branches()}
        except RuntimeError:
            return
        self.statuses.update(statuses)
        for column in self.query(BranchColumn):
            column.set_status(self.statuses.get(column.label))
        finished = {label for label, s in statuses.items() if s.state not in LIVE_STATES}
        if finished - self._reported_final or self._files_dirty:
            self._reported_final |= finished
            self._files_dirty = False
            self.run_worker(self._reread_report(), group="merge-picker-report", exclusive=True)

    async def _reread_report(self) -> None:
        method = getattr(self.coordinator, "diff_report", None)
        if method is None:
            return
        try:
            report = await asyncio.to_thread(method)
        except Exception:  # a branch being merged or aborted meanwhile: keep the old view
            return
        self.report = report
        for column in self.query(BranchColumn):
            column.set_changes(self._changes(column.label))

    async def _show_git(self) -> None:
        """The git state line (issue 25): current branch, HEAD, dirty files outside the
        highlighted branch's change; hidden outside a repository. The repository is read
        once (in a worker thread); moving the highlight only re-counts."""
        root = getattr(self.coordinator, "parent_path", None)
        if root is None:
            return
        if self._git_state is None:
            self._git_state = await asyncio.to_thread(repo_state, root)
        state = self._git_state
        label = self.highlighted_label
        paths = [c.path for c in self._changes(label)] if label is not None else None
        try:
            widget = self.query_one("#merge-picker-git", Static)
        except NoMatches:
            return
        widget.display = state is not None
        widget.update(Text(state.line(paths) if state is not None else ""))

    def action_git_pick(self, mode: str) -> None:
        """``c``: merge the highlighted branch and commit exactly its paths; ``b``: export
        it as a git branch (nothing lands)."""
        if self.labels and mode in ("commit", "export"):
            label = self.labels[self.highlighted]
            self.dismiss(
                GitChoice(MergeAction.pick(label), "commit" if mode == "commit" else "export")
            )

    def highlight(self, index: int) -> None:
        """Move the highlight to column ``index`` (clamped) and scroll it into view."""
        if not self.labels:
            return
        if self.is_mounted and index != self.highlighted:
            self.run_worker(self._show_git(), group="merge-picker-git", exclusive=True)
        self.highlighted = max(0, min(index, len(self.labels) - 1))
        for column in self.query(BranchColumn):
            column.set_class(column.index == self.highlighted, "-highlighted")
        target = self.query_one(f"#merge-column-{self.highlighted}", BranchColumn)
        self.query_one("#merge-picker-columns", HorizontalScroll).scroll_to_widget(
            target, animate=False
        )

    # ------------------------------------------------------------------ actions

    def action_move(self, step: int) -> None:
        self._arm(None)
        self.highlight(self.highlighted + step)

    def action_pick(self, number: int) -> None:
        """Choose branch ``number`` and say what merging it does; the same digit again
        (or Enter) merges it."""
        if not 1 <= number <= len(self.labels):
            self.notify(f"there is no branch {number}", severity="warning", markup=False)
            return
        label = self.labels[number - 1]
        if self.armed == label:
            self.dismiss(MergeAction.pick(label))
            return
        self.highlight(number - 1)
        self._arm(label)

    def what_merging_does(self, label: str) -> str:
        """One line: what lands where if ``label`` is merged, and how to confirm."""
        changes = self._changes(label)
        counts = change_counts(changes)
        lands = "no file changes" if not changes else f"{counts} land in the workspace"
        others = len(self.labels) - 1
        dropped = f"; the other {others} branch{'es are' if others != 1 else ' is'} discarded"
        number = self.labels.index(label) + 1
        return (
            f"Merge {label}? {lands}, its chat becomes yours{dropped if others else ''}. "
            f"Enter or {number} again: merge · c: merge and commit · Esc: back"
        )

    def _arm(self, label: str | None) -> None:
        self.armed = label
        for line in self.query("#merge-picker-confirm").results(Static):
            line.update(Text(self.what_merging_does(label)) if label else "")
            line.set_class(label is not None, "-shown")

    def action_pick_highlighted(self) -> None:
        if self.labels:
            self.dismiss(MergeAction.pick(self.labels[self.highlighted]))

    def action_cancel(self) -> None:
        if self.armed is not None:  # back to choosing, the picker stays
            self._arm(None)
            return
        self.dismiss(None)

    async def action_stop_and_pick(self) -> None:
        """The highlighted branch is still running: stop it, then merge what it has."""
        label = self.highlighted_label
        status = self.statuses.get(label or "")
        if label is None or status is None or self.coordinator is None:
            return
        if status.state not in LIVE_STATES:
            self.notify(f"branch {label} is not running: Enter merges it", markup=False)
            return
        await self.coordinator.terminate_branch(label)
        self.dismiss(MergeAction.pick(label))

    def _explorer(self, initial_path: str | None = None) -> DiffExplorerScreen:
        combiner = self.combiner
        if combiner is None and self.coordinator is not None:
            combiner = LiveCombiner(self.coordinator)  # live hunks; merging needs the chat's
        process = getattr(self.coordinator, "process_report", None)
        return DiffExplorerScreen(
            self.report,
            paths=self.diff_paths,
            difftool=self.difftool,
            labels=self.labels,
            initial_path=initial_path,
            env=self.env,
            combiner=combiner,
            process=process,
        )

    def _push_explorer(self, initial_path: str | None = None) -> None:
        """The explorer; a combined merge made there closes this picker with its result."""

        def done(result: Any) -> None:
            if result is not None:
                self.dismiss(result)

        self.app.push_screen(self._explorer(initial_path), callback=done)

    def action_explore(self) -> None:
        self._push_explorer()

    def action_open_tool(self) -> None:
        """The highlighted branch vs. the parent over the whole tree, in the detected tool."""
        label = self.highlighted_label
        if label is None:
            return
        branch_dir = self.diff_paths.branches.get(label) if self.diff_paths else None
        if self.diff_paths is None or branch_dir is None:
            self.notify(f"no directory known for branch {label}", severity="warning", markup=False)
            return
        try:
            outcome = launch_difftool(
                self.diff_paths.parent, [branch_dir], difftool=self.difftool, env=self.env
            )
        except BranchingError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.last_launch = outcome
        if outcome.wants_tui:
            changes = self._changes(label)
            self._push_explorer(changes[0].path if changes else None)
        else:
            self.notify(f"opened {label} vs. parent in the {outcome.kind} diff tool", markup=False)


__all__ = ["BranchColumn", "MergePickerModal"]
