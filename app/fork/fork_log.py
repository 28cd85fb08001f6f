"""``ForkLog``: the log strip under the fork view (notices and ``!cmd`` output).

Why: while a fork is open the branch panels take the transcript's place, so everything
the chat prints (``!cmd`` output, ``/cost``, ``/help``, steer confirmations, "waiting for
branch b", "asking the judge") was invisible until the fork closed (issue 13.2). The strip
is a small ``RichLog`` the chat screen writes every notice to while a fork is open; it
keeps the last :data:`MAX_LINES` lines, scrolls itself, and never takes the focus from
the composer.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import RichLog

MAX_LINES = 500

STYLES = {"information": "", "warning": "yellow", "error": "bold red"}


class ForkLog(RichLog, can_focus=False):
    """A few lines of notices below the fork tabs and panels."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, max_lines=MAX_LINES, wrap=True, markup=False, auto_scroll=True)
        self.lines_text: list[str] = []

    def add(self, text: str, severity: str = "information") -> None:
        """Append a notice (every line of it), styled by severity."""
        for line in text.splitlines() or [""]:
            self.lines_text.append(line)
            self.write(Text(line, style=STYLES.get(severity, "")))
        del self.lines_text[:-MAX_LINES]
