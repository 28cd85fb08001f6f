"""The fork view on the chat screen: tabs and panels in place of the transcript, the badge
on top, the log strip under them, and the status line kept up to date while branches run.

Why apart from the flows that open and close it: a fork is shown by three paths (a new
fork, a recovered one, a merge that was refused) and hidden by two (merge, abort); each
calls :meth:`ForkView.open` / :meth:`ForkView.close` and nothing else touches the widgets.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..gc_freeze import collect_and_freeze, freeze_long_lived
from .edit_notices import EDIT_EVENTS, edit_notice

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.timer import Timer
    from textual.widget import Widget

    from .fork_area import ForkArea
    from .fork_badge import ForkBadgeWidget
    from .fork_log import ForkLog

ALT_DIGIT_GLYPH_KEYS = (
    "inverted_exclamation_mark",
    "trade_mark_sign",
    "pound_sign",
    "cent_sign",
    "infinity",
    "section_sign",
    "pilcrow_sign",
    "bullet",
    "ª",
)
"""What alt+1..alt+9 arrive as. Terminals that send Alt as an ESC prefix (tmux, screen,
xterm, the VS Code terminal) send ``ESC 1``; Textual's parser maps that to ``¡`` (the
macOS option+1 glyph, as WezTerm sends it), and macOS terminals type the glyph itself.
While a fork is open these keys jump to branch N; otherwise they are typed as text."""

RELEASE_DELAY = 0.5
"""Seconds after a fork's view closed before its frozen widgets are collected (they are
removed from the screen by then)."""


def lazy(module: str, name: str) -> Any:
    """``module.name``, imported on first use: the fork and merge UIs (and pydantic-ai behind
    them) load only when a fork starts, which keeps the first frame fast."""
    return getattr(importlib.import_module(module), name)


class Composer(Protocol):
    """The chat's input, as the fork view changes it: alt+N glyphs jump to a branch."""

    passthrough_keys: frozenset[str]

    def focus(self, scroll_visible: bool = True) -> object: ...


class ForkViewHost(Protocol):
    """The screen the fork view is shown on: the slot it mounts into, the widgets it
    shows and hides, the status line and notices."""

    @property
    def fork_slot(self) -> Widget: ...

    @property
    def messages(self) -> Widget: ...

    @property
    def fork_log(self) -> ForkLog: ...

    @property
    def fork_badge(self) -> ForkBadgeWidget: ...

    @property
    def input(self) -> Composer: ...

    @property
    def is_attached(self) -> bool: ...

    def refresh_status(self, activity: str | None = None) -> None: ...

    def notice(
        self, text: str, severity: SeverityLevel = "information", *, toast: bool | None = None
    ) -> None: ...

    def set_timer(self, delay: float, callback: Callable[[], object] | None = None) -> Timer: ...


class ForkView:
    """Shows and hides ``screen``'s fork (:attr:`area` is set while one is shown)."""

    def __init__(self, screen: ForkViewHost) -> None:
        self.screen = screen
        self.area: ForkArea | None = None
        """The fork's tabs and panels while one is shown."""
        self._remove_listener: Callable[[], None] | None = None

    async def open(self, coordinator: Any) -> None:
        screen = self.screen
        area_cls = lazy("forkdeck.fork.fork_area", "ForkArea")
        slot = screen.fork_slot
        area: ForkArea = area_cls(coordinator, id="fork-area")
        self.area = area
        await slot.mount(area)
        slot.display = True
        screen.fork_log.clear()
        screen.fork_log.display = True
        screen.input.passthrough_keys = frozenset(ALT_DIGIT_GLYPH_KEYS)
        screen.messages.display = False
        screen.fork_badge.set_coordinator(coordinator)
        self._remove_listener = coordinator.add_listener(self._on_fork_event)
        screen.refresh_status()
        screen.input.focus()
        freeze_long_lived()  # the fork's UI and engine are loaded: keep full GCs short

    def close(self) -> None:
        screen = self.screen
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        if self.area is not None:
            self.area.remove()
            self.area = None
        screen.fork_slot.display = False
        screen.fork_log.display = False
        screen.input.passthrough_keys = frozenset()
        screen.messages.display = True
        screen.fork_badge.set_coordinator(None)
        screen.refresh_status()
        # The closed fork's widgets were frozen when it opened: once they are removed,
        # hand them (and the transcripts they hold) back to the collector.
        screen.set_timer(RELEASE_DELAY, self._release_closed)

    def _release_closed(self) -> None:
        if self.screen.is_attached and self.area is None:  # no newer fork open
            collect_and_freeze()

    def _on_fork_event(self, event: Any) -> None:
        # Runs inside the coordinator's publish: only cheap work here.
        # Called for every streamed token of every branch: the cheap name test comes first;
        # not attached means the app is shutting down while branches still report.
        watched = ("BranchCostUpdated", "BranchStateChanged")
        if type(event).__name__ in watched and self.screen.is_attached:
            self.screen.refresh_status()
        elif type(event).__name__ in EDIT_EVENTS and self.screen.is_attached:
            line = edit_notice(event)  # the user's own edits in a branch's mirror (17.2)
            if line is not None:
                self.screen.notice(*line)
