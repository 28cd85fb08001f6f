"""One line under the input: model, workspace backend, cost, tokens, what is happening.

Why a widget of its own: several sources (the parent run, a live fork, start-up) change
these figures; each calls :meth:`StatusBar.show` with the whole picture, so the line is
never half-updated.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.widgets import Static


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


def format_status(info: StatusInfo, width: int | None = None) -> str:
    """The status line; with ``width``, the longest form that fits (issue 13.21).

    Narrower forms drop the field names, then compact the tokens, then the backend, and
    last cut the model name; the activity (``thinking… (esc stops)``) is never dropped,
    because it says what the app is doing and how to stop it.
    """
    cost = f"${info.cost_usd:.4f}" + ("+?" if info.unpriced else "")
    tokens = f"tokens {info.input_tokens:,} in / {info.output_tokens:,} out"
    short_tokens = f"{_compact(info.input_tokens)}↑ {_compact(info.output_tokens)}↓"
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

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", markup=False, **kwargs)  # type: ignore[arg-type]
        self.info: StatusInfo | None = None

    def show(self, info: StatusInfo) -> None:
        if info != self.info:
            self.info = info
            self._render_line()

    def _room(self) -> int | None:
        width = self.content_region.width if self.is_mounted else 0
        return width or None

    def _render_line(self) -> None:
        if self.info is not None:
            self.update(format_status(self.info, self._room()))

    def on_resize(self) -> None:
        self._render_line()

    @property
    def text(self) -> str:
        """The line as shown (fitted to the bar's width once it has one)."""
        return format_status(self.info, self._room()) if self.info else ""
