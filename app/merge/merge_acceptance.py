"""The judge's verdict, shown *before* the merge fires so the user can still say no.

``auto_with_fallback`` defers the commit to the caller (seed 003, "Acceptance widget vs.
picker fall-through"): this widget shows the winner, the combined confidence, the judge's
rationale and concerns, and each branch's test result, and turns one key into one decision:

* ``Enter``: accept; the caller runs ``merge_or_select(MergeAction.pick(winner_label))``;
* ``d``: view the diff (``ShowDiff``); the modal pushes the diff explorer and stays put, so the
  verdict is still there on return;
* ``o``: override; the caller opens ``MergePickerModal(preselect=winner_label,
  subtitle=rationale)``;
* ``Esc``: cancel without committing.

Two ways to use it: mount ``MergeAcceptanceWidget`` anywhere and handle its messages
(``Accepted``, ``Override``, ``ShowDiff``, ``Cancelled``), or push ``MergeAcceptanceModal``
which dismisses with ``"accept"``, ``"override"`` or ``None`` and handles ``d`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static

from branching_core.fork import BranchStatus
from branching_core.review import BranchDiffReport, BranchTestResult, ResolveOutcome

from ..review.diff_explorer import DiffExplorerScreen
from ..review.merge_diff import DiffPaths, format_cost, state_badge

_TCSS = Path(__file__).with_suffix(".tcss")


def _tests_cell(result: BranchTestResult | None) -> Text:
    if result is None:
        return Text("-", style="dim")
    if result.source == "none":
        reason = "timed out" if result.timed_out else (result.error or "no result")
        return Text(reason, style="yellow")
    style = "green" if result.ok else "red"
    return Text(f"{result.passed}/{result.total} passed", style=style)


class MergeAcceptanceWidget(Vertical, can_focus=True):
    """Shows a ``ResolveOutcome``'s verdict; keys post one of the messages below."""

    DEFAULT_CSS = _TCSS.read_text(encoding="utf-8")
    SCOPED_CSS = False

    BINDINGS = [
        Binding("enter", "accept", "Accept"),
        Binding("d", "show_diff", "View diff"),
        Binding("o", "override", "Override"),
        Binding("escape", "cancel", "Cancel"),
    ]

    class Accepted(Message):
        """Enter: merge the judge's winner."""

        def __init__(self, winner_label: str) -> None:
            super().__init__()
            self.winner_label = winner_label

    class Override(Message):
        """o: open the picker preselected on the judge's pick, rationale as subtitle."""

        def __init__(self, winner_label: str | None, rationale: str) -> None:
            super().__init__()
            self.winner_label = winner_label
            self.rationale = rationale

    class ShowDiff(Message):
        """d: show the diff explorer (the verdict stays)."""

    class Cancelled(Message):
        """Esc: do nothing now; the cached outcome can be shown again later."""

    def __init__(
        self,
        outcome: ResolveOutcome,
        *,
        statuses: Sequence[BranchStatus] = (),
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.outcome = outcome
        self.statuses = list(statuses)

    # ------------------------------------------------------------------ data

    @property
    def winner_label(self) -> str | None:
        outcome = self.outcome
        if outcome.winner_label:
            return outcome.winner_label
        return outcome.verdict.winner if outcome.verdict is not None else None

    @property
    def rationale(self) -> str:
        return self.outcome.verdict.rationale if self.outcome.verdict is not None else ""

    def _confidence_line(self) -> Text:
        outcome = self.outcome
        line = Text()
        confidence = outcome.confidence
        if confidence is None and outcome.verdict is not None:
            confidence = outcome.verdict.confidence
        if confidence is None:
            line.append("confidence: none", style="dim")
        else:
            above = confidence >= outcome.threshold
            line.append(f"confidence {confidence:.2f}", style="bold green" if above else "bold red")
            extra = []
            if outcome.verdict is not None and outcome.confidence is not None:
                extra.append(f"judge {outcome.verdict.confidence:.2f}")
            extra.append(f"threshold {outcome.threshold:.2f}")
            line.append(f" ({' · '.join(extra)})", style="dim")
            line.append(" · above threshold" if above else " · below threshold")
        return line

    def _branch_table(self) -> Table | None:
        results: dict[str, BranchTestResult] = {
            r.label: r for r in self.outcome.test_results.values()
        }
        labels = [s.label for s in self.statuses]
        labels += [lb for lb in results if lb not in labels]
        if not labels:
            return None
        statuses = {s.label: s for s in self.statuses}
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        table.add_column("branch")
        if statuses:
            table.add_column("state")
            table.add_column("cost", justify="right")
        if results:
            table.add_column("tests")
        for label in labels:
            name = Text(label, style="bold reverse" if label == self.winner_label else "")
            row: list[RenderableType] = [name]
            if statuses:
                status = statuses.get(label)
                row.append(state_badge(status.state) if status else "-")
                row.append(format_cost(status.cost_usd) if status else "-")
            if results:
                row.append(_tests_cell(results.get(label)))
            table.add_row(*row)
        return table

    def _body(self) -> RenderableType:
        parts: list[RenderableType] = []
        outcome = self.outcome
        winner = Text("Winner: ", style="bold")
        winner.append(self.winner_label or "none", style="bold reverse")
        if outcome.verdict is not None and outcome.verdict.runner_up:
            winner.append(f"   runner-up: {outcome.verdict.runner_up}", style="dim")
        parts.append(winner)
        parts.append(self._confidence_line())
        if outcome.fallback_reason:
            parts.append(Text(f"fallback: {outcome.fallback_reason}", style="yellow"))
        if self.rationale:
            parts.append(Text(""))
            parts.append(Text(self.rationale))
        if outcome.verdict is not None and outcome.verdict.concerns:
            parts.append(Text(""))
            parts.append(Text("Concerns:", style="bold"))
            parts.extend(Text(f" • {c}") for c in outcome.verdict.concerns)
        table = self._branch_table()
        if table is not None:
            parts.append(Text(""))
            parts.append(table)
        return Group(*parts)

    def compose(self) -> ComposeResult:
        yield Static("Judge verdict", classes="merge-acceptance-title")
        yield Static(self._body(), classes="merge-acceptance-body")
        yield Static(
            "Enter accept · d view diff · o override (pick another) · Esc cancel",
            classes="merge-acceptance-help",
        )

    # ------------------------------------------------------------------ actions

    def action_accept(self) -> None:
        if self.winner_label is None:
            self.notify(
                "the judge named no winner; press o to pick one", severity="warning", markup=False
            )
            return
        self.post_message(self.Accepted(self.winner_label))

    def action_override(self) -> None:
        self.post_message(self.Override(self.winner_label, self.rationale))

    def action_show_diff(self) -> None:
        self.post_message(self.ShowDiff())

    def action_cancel(self) -> None:
        self.post_message(self.Cancelled())


class MergeAcceptanceModal(ModalScreen[str | None]):
    """The widget as a modal: dismisses with ``"accept"``, ``"override"`` or ``None``.

    ``d`` pushes ``DiffExplorerScreen`` over this modal (report: ``report`` or
    ``outcome.report``), so closing the explorer returns to the same verdict.
    """

    def __init__(
        self,
        outcome: ResolveOutcome,
        *,
        statuses: Sequence[BranchStatus] = (),
        report: BranchDiffReport | None = None,
        paths: DiffPaths | None = None,
        difftool: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.outcome = outcome
        self.statuses = list(statuses)
        self.report = report if report is not None else outcome.report
        self.diff_paths = paths
        self.difftool = difftool
        self.env = env

    def compose(self) -> ComposeResult:
        yield MergeAcceptanceWidget(self.outcome, statuses=self.statuses, id="merge-acceptance")

    def on_mount(self) -> None:
        self.query_one(MergeAcceptanceWidget).focus()

    def on_merge_acceptance_widget_accepted(self, event: MergeAcceptanceWidget.Accepted) -> None:
        event.stop()
        self.dismiss("accept")

    def on_merge_acceptance_widget_override(self, event: MergeAcceptanceWidget.Override) -> None:
        event.stop()
        self.dismiss("override")

    def on_merge_acceptance_widget_cancelled(self, event: MergeAcceptanceWidget.Cancelled) -> None:
        event.stop()
        self.dismiss(None)

    def on_merge_acceptance_widget_show_diff(self, event: MergeAcceptanceWidget.ShowDiff) -> None:
        event.stop()
        if self.report is None:
            self.notify("no diff report for this fork", severity="warning", markup=False)
            return
        self.app.push_screen(
            DiffExplorerScreen(
                self.report,
                paths=self.diff_paths,
                difftool=self.difftool,
                labels=[s.label for s in self.statuses],
                env=self.env,
            )
        )


__all__ = ["MergeAcceptanceModal", "MergeAcceptanceWidget"]
