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
    tokens_estimated: bool = False
    """Some counts are estimated from text (the server sent no usage): shown as ``~N``."""


def format_status(info: StatusInfo) -> str:
    cost = f"${info.cost_usd:.4f}" + ("+?" if info.unpriced else "")
    mark = "~" if info.tokens_estimated else ""
    parts = [
        f"model {info.model}",
        f"workspace {info.backend}",
        cost,
        f"tokens {mark}{info.input_tokens:,} in / {mark}{info.output_tokens:,} out",
    ]
    if info.activity:
        parts.append(info.activity)
    return " │ ".join(parts)


class StatusBar(Static):
    """The status line (see the module docstring)."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", markup=False, **kwargs)  # type: ignore[arg-type]
        self.info: StatusInfo | None = None

    def show(self, info: StatusInfo) -> None:
        if info != self.info:
            self.info = info
            self.update(format_status(info))

    @property
    def text(self) -> str:
        return format_status(self.info) if self.info else ""
