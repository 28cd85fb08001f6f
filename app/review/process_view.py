"""ProcessViewModal: how each branch worked, side by side (``coord.process_report()``).

Why: two branches can end with similar diffs after very different runs (one read the code
and wrote once, the other guessed, failed and retried five times). The diff explorer shows
the outcome; this shows the process: one column per branch, one row per tool step aligned
by index (tool, arguments summary, status, duration, cost), the row where the branches
diverged marked, and each branch's totals at the bottom. ``Esc`` closes it.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from branching_core.review import ProcessMoment, ProcessReport, ToolStep

STATUS_STYLES = {
    "success": "green",
    "failed": "bold red",
    "denied": "red",
    "interrupted": "yellow",
    "retried": "yellow",
    "pending": "dim",
}


def step_cell(step: ToolStep | None) -> Text:
    """``write_file(path='a.py')`` over ``✓ success · 0.4s · $0.0012``."""
    if step is None:
        return Text("—", style="dim")
    cell = Text(f"{step.tool}", style="bold")
    cell.append(f"({step.args})" if step.args else "()", style="")
    cell.append("\n")
    cell.append(step.status, style=STATUS_STYLES.get(step.status, ""))
    if step.duration_s is not None:
        cell.append(f" · {step.duration_s:.1f}s", style="dim")
    if step.cost_usd is not None:
        cell.append(f" · ${step.cost_usd:.4f}", style="dim")
    return cell


def process_table(report: ProcessReport) -> Table:
    """The aligned steps as a Rich table (also what a snapshot shows)."""
    table = Table(expand=True, show_lines=True, pad_edge=False)
    table.add_column("#", justify="right", style="dim", no_wrap=True, width=4)
    for label in report.steps:
        table.add_column(label, overflow="fold", ratio=1)
    for i, row in enumerate(report.rows()):
        diverged = report.diverged_at == i
        index = Text(f"◆{i + 1}", style="bold magenta") if diverged else Text(str(i + 1))
        table.add_row(index, *(step_cell(row[label]) for label in report.steps))
    totals = []
    for label in report.steps:
        t = report.totals(label)
        cost = "cost unknown" if t["cost_usd"] is None else f"${t['cost_usd']:.4f}"
        totals.append(
            Text(
                f"{t['calls']} call(s) · {t['failed']} failed · {t['retried']} retried\n"
                f"{t['duration_s']:.1f}s · {cost}",
                style="bold",
            )
        )
    table.add_row(Text("Σ", style="bold"), *totals)
    return table


MOMENT_STYLES = {
    "prompt": "bold",
    "steer": "bold magenta",
    "request": "",
    "command": "cyan",
    "edit": "yellow",
}


def moment_cell(moment: ProcessMoment | None) -> Text:
    if moment is None:
        return Text("")
    return Text(moment.text, style=MOMENT_STYLES.get(moment.kind, ""))


def moments_table(report: ProcessReport) -> Table:
    """Each branch's prompts, steers, model requests, ``!cmd``s and IDE edits, in order
    (issue 24.12: a branch that only talked showed an empty view)."""
    table = Table(expand=True, show_lines=False, pad_edge=False)
    table.add_column("#", justify="right", style="dim", no_wrap=True, width=4)
    labels = list(report.moments)
    for label in labels:
        table.add_column(label, overflow="fold", ratio=1)
    n = max((len(m) for m in report.moments.values()), default=0)
    for i in range(n):
        cells = [
            moment_cell(report.moments[label][i] if i < len(report.moments[label]) else None)
            for label in labels
        ]
        table.add_row(Text(str(i + 1)), *cells)
    return table


def divergence_line(report: ProcessReport) -> str:
    if not report.steps:
        return "no branches"
    if len(report.steps) == 1:
        return "one branch"
    if report.diverged_at is None:
        return "every branch made the same tool calls"
    if report.diverged_at == 0:
        return "the branches diverged at step 1 (◆)"
    return (
        f"the branches made the same first {report.diverged_at} call(s), "
        f"then diverged at step {report.diverged_at + 1} (◆)"
    )


class ProcessViewModal(ModalScreen[None]):
    """One column per branch, one row per tool step; ``Esc`` closes."""

    CSS_PATH = "process_view.tcss"
    BINDINGS = [Binding("escape", "close", "Close"), Binding("p", "close", "Close", show=False)]

    def __init__(self, report: ProcessReport) -> None:
        super().__init__()
        self.report = report

    def compose(self) -> ComposeResult:
        steps = sum(len(s) for s in self.report.steps.values())
        requests = sum(
            1 for ms in self.report.moments.values() for m in ms if m.kind == "request"
        )
        with Vertical(id="process-view"):
            yield Static(
                f"How the branches worked · {len(self.report.steps)} branches · "
                f"{requests} model requests · {steps} tool calls",
                id="process-title",
            )
            yield Static(Text(divergence_line(self.report)), id="process-divergence")
            with VerticalScroll(id="process-body"):
                if any(self.report.moments.values()):
                    yield Static(moments_table(self.report), id="process-moments")
                if any(self.report.steps.values()):
                    yield Static(Text("tool calls, aligned", style="bold"), classes="heading")
                    yield Static(process_table(self.report), id="process-table")
                else:
                    yield Static("no branch has called a tool yet", id="process-table")
            yield Static("↑/↓ scroll · Esc close", id="process-help")

    def on_mount(self) -> None:
        self.query_one("#process-body", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)


__all__ = [
    "ProcessViewModal",
    "divergence_line",
    "moment_cell",
    "moments_table",
    "process_table",
    "step_cell",
]
