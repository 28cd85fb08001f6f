"""One line under the input: model, workspace backend, cost, tokens, what is happening.

Why a widget of its own: several sources (the parent run, a live fork, start-up) change
these figures; each calls :meth:`StatusBar.show` with the whole picture, so the line is
never half-updated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from textual.timer import Timer
from textual.widgets import Static

from ..common.redraw import update_in_place

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
BUSY_INTERVAL = 0.1
"""Seconds between two frames of the spinner (only while something long is running)."""


@dataclass(frozen=True)
class StatusInfo:
    """Everything the status line shows."""

    model: str
    backend: str
    cost_usd: float
    input_tokens: int
    output_tokens: int
    activity: str = ""
    unpriced: bool = False
    tokens_estimated: bool = False
    """Some counts are estimated from text (the server sent no usage): shown as ``~N``."""


def format_status(info: StatusInfo, width: int | None = None) -> str:
    """The status line; with ``width``, the longest form that fits (issue 13.21).

    Narrower forms drop the field names, then compact the tokens, then the backend, and
    last cut the model name; the activity (``thinking… (esc stops)``) is never dropped,
    because it says what the app is doing and how to stop it.
    """
    cost = f"${info.cost_usd:.4f}" + ("+?" if info.unpriced else "")
    mark = "~" if info.tokens_estimated else ""
    tokens = f"tokens {mark}{info.input_tokens:,} in / {mark}{info.output_tokens:,} out"
    short_tokens = f"{mark}{_compact(info.input_tokens)}↑ {mark}{_compact(info.output_tokens)}↓"
    forms = [
        [f"model {info.model}", f"workspace {info.backend}", cost, tokens],
        [info.model, info.backend, cost, tokens],
        [info.model, info.backend, cost, short_tokens],
        [info.model, cost, short_tokens],
    ]
    line = ""
    for parts in forms:
        line = " │ ".join([*parts, info.activity] if info.activity else parts)
        if width is None or len(line) <= width:
            return line
    # Still too wide: cut the model name, then drop the tokens, then the cost.
    activity = [info.activity] if info.activity else []
    rest = " │ ".join([cost, short_tokens, *activity])
    room = (width or 0) - len(rest) - 3
    if room >= 8:
        model = info.model if len(info.model) <= room else info.model[: room - 1] + "…"
        return f"{model} │ {rest}"
    for parts in ([cost, short_tokens, *activity], [cost, *activity], activity or [cost]):
        line = " │ ".join(parts)
        if len(line) <= (width or 0):
            return line
    return line[: max(1, (width or 1) - 1)] + "…"


def _compact(n: int) -> str:
    """``950``, ``12.3k``, ``4.1M``: token counts in at most ~5 characters."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


class StatusBar(Static):
    """The status line (see the module docstring)."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("", markup=False, id=id, classes=classes)
        self.info: StatusInfo | None = None
        self.busy: str | None = None
        self._busy_since = 0.0
        self._busy_timer: Timer | None = None
        self._frame = 0
        self._drawn: str | None = None

    def set_busy(self, label: str | None) -> None:
        """Show ``label`` with a spinner and the seconds spent, until called with None.

        For waits of seconds the user must not mistake for a hang (issue 13.10): spawning
        branches, waiting for a running branch before a merge, asking the judge.
        """
        if label == self.busy:
            return
        self.busy = label
        if label is None:
            if self._busy_timer is not None:
                self._busy_timer.stop()
                self._busy_timer = None
        else:
            self._busy_since = time.monotonic()
            if self._busy_timer is None and self.is_attached:
                self._busy_timer = self.set_interval(BUSY_INTERVAL, self._tick)
        self._render_line()

    def _tick(self) -> None:
        self._frame += 1
        self._render_line()

    @property
    def busy_text(self) -> str:
        """``⠋ spawning 3 branches… 1.4 s`` while busy, else ''."""
        if self.busy is None:
            return ""
        elapsed = time.monotonic() - self._busy_since
        return f"{SPINNER[self._frame % len(SPINNER)]} {self.busy}… {elapsed:.1f} s"

    def _shown(self) -> StatusInfo | None:
        if self.info is None or self.busy is None:
            return self.info
        return replace(self.info, activity=self.busy_text)

    def show(self, info: StatusInfo) -> None:
        if info != self.info:
            self.info = info
            self._render_line()

    def _room(self) -> int | None:
        width = self.content_region.width if self.is_mounted else 0
        return width or None

    def _render_line(self) -> None:
        shown = self._shown()
        if shown is not None:
            line = format_status(shown, self._room())
            if line != self._drawn:
                self._drawn = line
                update_in_place(self, line)  # one fixed line: no screen layout

    def on_resize(self) -> None:
        self._render_line()

    @property
    def text(self) -> str:
        """The line as shown (fitted to the bar's width once it has one)."""
        shown = self._shown()
        return format_status(shown, self._room()) if shown else ""
