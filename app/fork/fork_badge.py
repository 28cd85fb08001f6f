"""``ForkBadgeWidget``: one line summing up the live fork.

Shown as ``FORK: 3 branches · 2 running · $0.04``. Why a widget of its own: the chat
screen keeps it in view while the user looks at the
parent conversation, so a fork running in the background is never forgotten. It is hidden
whenever there is no fork. It can be fed numbers directly (:meth:`show_summary`) or follow a
coordinator by itself (:meth:`set_coordinator`): it then listens to the coordinator's events
and recomputes the summary from its public API, at most once per event burst.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import on
from textual.message import Message
from textual.widgets import Static

from ..common.redraw import update_in_place

if TYPE_CHECKING:
    from branching_core.fork import ForkCoordinator


def format_summary(branches: int, running: int, cost_usd: float | None) -> str:
    """The badge text; ``cost_usd`` None means no branch's cost is known yet."""
    noun = "branch" if branches == 1 else "branches"
    cost = "$?" if cost_usd is None else f"${cost_usd:.2f}"
    return f"FORK: {branches} {noun} · {running} running · {cost}"


class ForkBadgeWidget(Static):
    """Summary of the active fork; ``display`` is False while there is none."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    class CoordinatorChanged(Message):
        """Coalesced 'the coordinator changed' signal, posted from its listener."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("", markup=False, id=id, classes=classes)
        self._coordinator: ForkCoordinator | None = None
        self._remove_listener: Callable[[], None] | None = None
        self._refresh_pending = False
        self.summary_text: str = ""

    # -- feeding numbers directly ----------------------------------------------------------
    def show_summary(self, branches: int, running: int, cost_usd: float | None) -> None:
        """Show the badge with these numbers (no redraw when they read the same)."""
        text = format_summary(branches, running, cost_usd)
        if text != self.summary_text:
            self.summary_text = text
            update_in_place(self, text)  # one fixed line: no screen layout
        self.display = True

    def clear(self) -> None:
        """Hide the badge (no fork)."""
        self.summary_text = ""
        self.update("")
        self.display = False

    # -- following a coordinator -----------------------------------------------------------
    def set_coordinator(self, coordinator: ForkCoordinator | None) -> None:
        """Follow ``coordinator`` (None: stop following and hide)."""
        self._detach()
        self._coordinator = coordinator
        if coordinator is None:
            self.clear()
            return
        self._remove_listener = coordinator.add_listener(self._on_fork_event)
        self.refresh_from_coordinator()

    def refresh_from_coordinator(self) -> None:
        """Recompute the summary from the followed coordinator's public state."""
        coord = self._coordinator
        if coord is None or coord.handle is None or coord.is_resolved:
            self.clear()
            return
        statuses = coord.inspect_branches()
        running = sum(1 for s in statuses if s.state == "running")
        self.show_summary(len(statuses), running, coord.fork_cost().aggregate_usd)

    def _on_fork_event(self, event: Any) -> None:
        # Runs inside the coordinator's publish call: only note that something changed.
        # Text deltas (hundreds a second with ten branches) change no figure shown here;
        # each refresh cost a screen layout.
        if type(event).__name__ == "BranchTextDelta":
            return
        if not self._refresh_pending:
            self._refresh_pending = True
            self.post_message(self.CoordinatorChanged())

    @on(CoordinatorChanged)
    def _refresh_now(self, message: CoordinatorChanged) -> None:
        message.stop()
        self._refresh_pending = False
        self.refresh_from_coordinator()

    def _detach(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None

    def on_unmount(self) -> None:
        self._detach()
