"""``ForkArea``: the live view of one fork (tab strip, a panel per branch, an overview).

Why it is built this way:

* The coordinator knows no UI; it calls our listener synchronously from inside a branch
  task. The listener only appends the event to an inbox and, if none is pending, posts one
  ``_Drain`` message. The drain handler then applies *every* queued event in one go inside
  Textual's own message loop, so a burst of tokens from ten branches costs one handler run,
  and branch panels draw buffered text at most :data:`FLUSH_INTERVAL` apart.
* The listener is registered in ``__init__`` (not on mount), so nothing streamed between
  ``coordinator.fork()`` returning and this widget being mounted is lost; branches that
  already have history (a recovered fork, a late mount) are replayed from it.
* Selection is explicit: ``active_label`` (None = overview), :meth:`select`, :meth:`cycle`
  (overview -> branch 0 -> branch 1 -> ... -> overview) and :meth:`jump` (1-based; 0 =
  overview). Every change posts :class:`ForkArea.Selected`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Static

from ..common.redraw import update_in_place
from .branch_panel import BranchPanelWidget, format_cost, one_line
from .fork_tabs import STATE_BADGES, ForkTabsWidget

if TYPE_CHECKING:
    from branching_core.fork import BranchRuntime, ForkCoordinator

OVERVIEW_INTERVAL = 0.2
"""Seconds between two redraws of the overview table while branches stream."""
OVERVIEW_COLUMNS = ("#", "branch", "state", "model", "cost / budget", "tools", "last line")
LAST_LINE_WIDTH = 48


def last_line(text: str, width: int = LAST_LINE_WIDTH) -> str:
    """The *end* of the last non-empty line, at most ``width`` characters: a stream grows at
    its end, so showing the start of a long line made a live branch look frozen (13.19)."""
    tail = text[-(width * 8) :]  # the last line's end is all we show: never split it all
    lines = [line for line in tail.splitlines() if line.strip()]
    line = " ".join(lines[-1].split()) if lines else ""
    return line if len(line) <= width else "…" + line[-(width - 1) :]


class ForkOverview(Vertical):
    """The ``+ overview`` page: one aligned text row per branch.

    Plain aligned text in one ``Static`` rather than a ``DataTable``: the table rendered
    cell by cell (about 100 ms a redraw on a loaded machine, five redraws a second while
    branches stream), which is what made keys slow while the overview was shown.
    """

    text = ""
    """The rows as drawn (headings first), for tests and screen readers."""
    title = ""
    """The title line as drawn."""

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        with VerticalScroll(classes="rows", can_focus=False):
            yield Static("", classes="table")

    def show_title(self, title: str) -> None:
        """Draw the title line (no redraw, and no screen layout, when nothing changed)."""
        if title != self.title:
            self.title = title
            update_in_place(self.query_one(".title", Static), title)

    def show_rows(self, rows: list[tuple[str, ...]]) -> None:
        """Draw ``rows`` under the column headings (no redraw when nothing changed)."""
        table = [tuple(OVERVIEW_COLUMNS), *rows]
        widths = [max(len(row[c]) for row in table) for c in range(len(OVERVIEW_COLUMNS))]
        lines = [
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in table
        ]
        text = "\n".join(lines)
        if text == self.text:
            return
        self.text = text
        rendered = Text(text, no_wrap=True, overflow="ellipsis")
        rendered.stylize("bold", 0, len(lines[0]))
        update_in_place(self.query_one(".table", Static), rendered)


class ForkArea(Vertical):
    """Tabs + a ``ContentSwitcher`` of branch panels + the overview, for ``coordinator``."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    class Selected(Message):
        """The active tab changed; ``label`` None is the overview."""

        def __init__(self, area: ForkArea, label: str | None) -> None:
            super().__init__()
            self.area = area
            self.label = label

    class ApprovalRequested(Message):
        """Branch ``label`` waits for tool approvals (``calls``: tool_call_id, tool_name, args)."""

        def __init__(self, label: str, calls: list[Any], branch_id: str = "") -> None:
            super().__init__()
            self.label = label
            self.calls = calls
            self.branch_id = branch_id

    class Resolved(Message):
        """The fork was merged (``action`` ``pick:<label>``/...) or aborted (``abort``)."""

        def __init__(self, action: str, winner_label: str | None) -> None:
            super().__init__()
            self.action = action
            self.winner_label = winner_label

    class _Drain(Message):
        """Events are waiting in the inbox."""

    def __init__(
        self, coordinator: ForkCoordinator, *, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(id=id, classes=classes)
        from branching_core import fork as ev  # the coordinator already loaded it

        self._ev = ev
        self._approval_event: type | None = getattr(ev, "BranchApprovalRequested", None)
        self.coordinator = coordinator
        self._inbox: list[Any] = []
        self._drain_posted = False
        self._active: str | None = None
        self._overview_timer: Timer | None = None
        self._panels: dict[str, BranchPanelWidget] = {}
        self._ids: dict[str, str] = {}  # branch_id -> label
        self._labels: list[str] = []
        self._remove_listener: Callable[[], None] | None = coordinator.add_listener(
            self._on_fork_event
        )
        self._build_panels()

    # -- construction ----------------------------------------------------------------------
    def _runtimes(self) -> list[BranchRuntime]:
        return sorted(self.coordinator.branches.values(), key=lambda rt: rt.index)

    def _build_panels(self) -> None:
        self._panels, self._ids, self._labels = {}, {}, []
        for rt in self._runtimes():
            panel = BranchPanelWidget(
                rt.label,
                steer=rt.spec.steer,
                model=rt.spec.model,
                budget_usd=rt.spec.budget_usd,
                state=rt.state,
                cost_usd=rt.meter.cumulative_usd,
                id=f"branch-{len(self._labels)}",
                shown=False,  # the overview is shown first
            )
            _replay(panel, rt)
            self._panels[rt.label] = panel
            self._ids[rt.branch_id] = rt.label
            self._labels.append(rt.label)

    def compose(self) -> ComposeResult:
        states = {label: panel.state for label, panel in self._panels.items()}
        yield ForkTabsWidget(self._labels, states)
        with ContentSwitcher(initial="overview"):
            yield ForkOverview(id="overview")
            yield from self._panels.values()

    def on_mount(self) -> None:
        # Not a direct call: Textual sets ``is_mounted`` only after this handler returns, so
        # the redraw would be skipped, and a recovered fork (no event to redraw it later)
        # showed an empty overview.
        self.call_after_refresh(self._redraw_overview)
        if self._inbox and not self._drain_posted:
            self._drain_posted = True
            self.post_message(self._Drain())

    def on_unmount(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None

    # -- public API ------------------------------------------------------------------------
    @property
    def labels(self) -> list[str]:
        """Branch labels in fork order."""
        return list(self._labels)

    @property
    def active_label(self) -> str | None:
        """The branch shown now; None when the overview is shown."""
        return self._active

    @property
    def tabs(self) -> ForkTabsWidget:
        return self.query_one(ForkTabsWidget)

    @property
    def overview(self) -> ForkOverview:
        return self.query_one(ForkOverview)

    def panel(self, label: str) -> BranchPanelWidget:
        """The panel of branch ``label`` (KeyError for an unknown label)."""
        return self._panels[label]

    def select(self, label: str | None) -> None:
        """Show branch ``label`` (None: the overview). ValueError for an unknown label."""
        if label is not None and label not in self._panels:
            raise ValueError(f"no branch {label!r}; branches: {', '.join(self._labels)}")
        changed = label != self._active
        if self._active is not None and changed and self._active in self._panels:
            self._panels[self._active].set_shown(False)
        self._active = label
        switcher = self.query_one(ContentSwitcher)
        switcher.current = "overview" if label is None else self._panels[label].id
        self.tabs.set_active(label)
        if label is not None:
            self._panels[label].set_shown(True)
            self._panels[label].flush()
        elif changed:
            self._redraw_overview()  # not redrawn while hidden
        if changed:
            self.post_message(self.Selected(self, label))

    def cycle(self, step: int = 1) -> str | None:
        """Move ``step`` tabs along overview -> branch 0 -> ... -> overview; returns the new one."""
        order: list[str | None] = [None, *self._labels]
        index = order.index(self._active) if self._active in order else 0
        target = order[(index + step) % len(order)]
        self.select(target)
        return target

    def jump(self, n: int) -> bool:
        """Show branch ``n`` (1-based; 0 = overview). False (nothing changes) when out of range."""
        if n == 0:
            self.select(None)
            return True
        if 1 <= n <= len(self._labels):
            self.select(self._labels[n - 1])
            return True
        return False

    def scroll_active(self, pages: int) -> None:
        """PgUp/PgDn: scroll the shown branch's transcript (the input keeps the focus)."""
        if self._active is not None:
            self._panels[self._active].scroll_page(pages)

    def open_output(self) -> bool:
        """``ctrl+o``: the full text of the shown branch's tool results, newest first.

        False (and a toast saying why) on the overview or when the branch ran no tool yet.
        """
        from ..common.tool_output import ToolOutput, ToolOutputModal

        if self._active is None:
            self.notify("select a branch tab first (Tab)", severity="warning", markup=False)
            return False
        results = self._panels[self._active].results
        if not results:
            self.notify(f"branch {self._active} has no tool output yet", markup=False)
            return False
        outputs = [ToolOutput(r.tool_name, r.full_text) for r in results]
        self.app.push_screen(ToolOutputModal(self._active, outputs))
        return True

    def add_user_message(self, label: str, message: str) -> None:
        """Show a follow-up turn the user started on ``label`` (``run_on_branch``)."""
        self._panels[label].add_user_message(message)

    def flush(self) -> None:
        """Apply every queued event and draw every buffered delta now (tests, shutdown)."""
        self._apply(self._take_inbox())
        for panel in self._panels.values():
            panel.flush()
        self._redraw_overview()

    def on_fork_tabs_widget_selected(self, message: ForkTabsWidget.Selected) -> None:
        """A chip was clicked or a key pressed on the tab strip."""
        message.stop()
        self.select(message.label)

    # -- events ----------------------------------------------------------------------------
    def _on_fork_event(self, event: Any) -> None:
        # Called synchronously by the coordinator from a branch task: queue, post once.
        self._inbox.append(event)
        if not self._drain_posted and self.is_mounted:
            self._drain_posted = True
            self.post_message(self._Drain())

    def _take_inbox(self) -> list[Any]:
        events, self._inbox = self._inbox, []
        self._drain_posted = False
        return events

    @on(_Drain)
    async def _drain(self, message: _Drain) -> None:
        message.stop()
        events = self._take_inbox()
        if any(isinstance(e, self._ev.ForkCreated) for e in events):
            await self._rebuild()
        self._apply(events)

    async def _rebuild(self) -> None:
        """The coordinator started a new fork: rebuild tabs and panels from it."""
        old = list(self._panels.values())
        self._build_panels()
        self._active = None
        switcher = self.query_one(ContentSwitcher)
        switcher.current = "overview"
        for panel in old:
            await panel.remove()
        await switcher.mount_all(list(self._panels.values()))
        states = {label: panel.state for label, panel in self._panels.items()}
        await self.tabs.set_branches(self._labels, states)
        self.tabs.set_active(None)

    def _apply(self, events: list[Any]) -> None:
        ev = self._ev
        structural = False
        for event in events:
            label = self._ids.get(getattr(event, "branch_id", ""), None)
            panel = self._panels.get(label) if label is not None else None
            if isinstance(event, ev.BranchTextDelta):
                if panel is not None:
                    panel.append_text(event.text)
                continue
            if isinstance(event, ev.BranchTerminalOutput):  # an external agent's terminal
                if panel is not None:
                    panel.append_terminal(event.text)
                continue
            if isinstance(event, ev.BranchResponseStarted):  # never glue two responses
                if panel is not None and label is not None:
                    panel.begin_request()  # steers drawn where the model reads them
                continue
            if isinstance(event, ev.BranchResponseRestarted) and panel is not None:
                panel.add_note("↻ the server cut the response; asking again")
                continue
            structural = True
            if panel is None or label is None:
                if isinstance(event, ev.ForkResolved):
                    self._on_resolved(event)
                continue
            if isinstance(event, ev.BranchStateChanged):
                panel.set_state(event.state, event.error)
                self.tabs.set_state(label, event.state)
            elif isinstance(event, ev.BranchToolCall):
                panel.add_tool_call(event.tool_name, event.args, event.tool_call_id)
            elif isinstance(event, ev.BranchToolResult):
                panel.add_tool_result(event.tool_name, event.content, event.tool_call_id)
            elif isinstance(event, ev.BranchSteered):
                # Drawn where the model reads it (the next request), not where it was typed;
                # until then the panel's header counts it as queued.
                panel.add_steer(event.message)
            elif isinstance(event, ev.BranchCostUpdated):
                # Published once per model response, as it completes: the response boundary.
                panel.end_response()
                panel.set_cost(event.cumulative_usd)
            elif self._approval_event is not None and isinstance(event, self._approval_event):
                calls = list(getattr(event, "calls", []) or [])
                panel.set_state("awaiting_approval")
                panel.add_note(
                    "⏸ waiting for approval: "
                    + ", ".join(f"{c.tool_name} {one_line(c.args, 60)}" for c in calls)
                )
                self.tabs.set_state(label, "awaiting_approval")
                self.post_message(self.ApprovalRequested(label, calls, event.branch_id))
        if structural:
            self._redraw_overview()
        elif events:
            self._schedule_overview()

    def _on_resolved(self, event: Any) -> None:
        for status in self.coordinator.inspect_branches():
            if status.label in self._panels:
                self.tabs.set_state(status.label, status.state)
        winner = self._ids.get(event.winner_branch_id or "")
        self.post_message(self.Resolved(event.action, winner))

    # -- overview --------------------------------------------------------------------------
    def _schedule_overview(self) -> None:
        if self._overview_timer is None and self.is_mounted:
            self._overview_timer = self.set_timer(OVERVIEW_INTERVAL, self._redraw_overview)

    def overview_rows(self) -> list[tuple[str, ...]]:
        """The overview table's rows (the same strings the table shows).

        The "last line" column gets the width the others leave (so an 80-column terminal
        shows whole rows, not a table cut at its right edge) and shows the line's end.
        """
        heads = []
        for n, status in enumerate(self.coordinator.inspect_branches(), start=1):
            panel = self._panels.get(status.label)
            state = panel.state if panel is not None else status.state
            text = panel.tail_text(LAST_LINE_WIDTH * 8) if panel is not None else ""
            heads.append(
                (
                    (
                        str(n),
                        status.label,
                        f"{STATE_BADGES.get(state, '?')} {state.replace('_', ' ')}",
                        status.model or "default",
                        format_cost(status.cost_usd, status.budget_usd),
                        str(status.tool_calls),
                    ),
                    text,
                )
            )
        width = self._last_line_width([cells for cells, _ in heads])
        return [(*cells, last_line(text, width)) for cells, text in heads]

    def _last_line_width(self, rows: list[tuple[str, ...]]) -> int:
        """Columns left for "last line" after the others (each padded by 2 cells)."""
        if not self.is_mounted or self.size.width == 0:
            return LAST_LINE_WIDTH
        used = 0
        for index, header in enumerate(OVERVIEW_COLUMNS[:-1]):
            cells = [len(header), *(len(row[index]) for row in rows)]
            used += max(cells) + 2
        return max(12, min(LAST_LINE_WIDTH * 2, self.size.width - used - 3))

    def _redraw_overview(self) -> None:
        self._overview_timer = None
        if not self.is_mounted or self._active is not None:
            return  # hidden behind a branch tab: redrawn when shown (select(None))
        overview = self.overview
        overview.show_rows(self.overview_rows())
        summary = self.coordinator.fork_cost() if self.coordinator.handle else None
        running = sum(1 for p in self._panels.values() if p.state == "running")
        cost = (
            "$?"
            if summary is None or summary.aggregate_usd is None
            else (f"${summary.aggregate_usd:.4f}")
        )
        cap = summary.aggregate_budget_usd if summary else None
        overview.show_title(
            f"{len(self._labels)} branches · {running} running · {cost}"
            + (f" of ${cap:g}" if cap is not None else "")
            + "  (Tab: next tab · F1-F9: branch · Esc: abort fork)"
        )


def _replay(panel: BranchPanelWidget, rt: BranchRuntime) -> None:
    """Fill ``panel`` from the branch's history beyond the fork point (late mount, recovery)."""
    start = len(rt.seed_history)
    steer_seen = False
    for message in rt.history[start:]:
        for part in getattr(message, "parts", []):
            kind = getattr(part, "part_kind", "")
            if kind == "user-prompt":
                content = part.content if isinstance(part.content, str) else str(part.content)
                if content == rt.spec.steer and not steer_seen:
                    steer_seen = True
                else:
                    panel.add_user_message(content)
            elif kind == "text" and part.content:
                panel.append_text(part.content)
                panel.flush()
            elif kind == "tool-call":
                panel.add_tool_call(part.tool_name, part.args, part.tool_call_id)
            elif kind == "tool-return":
                content = part.content if isinstance(part.content, str) else repr(part.content)
                panel.add_tool_result(part.tool_name, content, part.tool_call_id)
        if getattr(message, "kind", "") == "response":
            panel.end_response()  # each response its own block, as when it streamed
    if rt.error:
        panel.set_state(rt.state, rt.error)
