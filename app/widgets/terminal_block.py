"""``TerminalBlock``: an external agent's terminal output inside a branch panel.

An external agent (Claude Code, aider...) in a fork branch writes to a pseudo-terminal;
its lines arrive as ``BranchTerminalOutput`` events with their ANSI colours. This block
keeps the last :data:`MAX_LINES` of them and draws them with those colours, each line
cropped to the panel's width (as a terminal of that width would show it), never wrapped.
"""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.content import Content

from .branch_panel import TranscriptBlock

MAX_LINES = 400


class TerminalBlock(TranscriptBlock):
    """The agent's terminal: plain ``text`` for copying and tests, colours on screen."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=MAX_LINES)
        super().__init__("terminal", "")

    def add_line(self, line: str, *, draw: bool = True) -> None:
        self.lines.append(line)
        self.set_text("\n".join(self.lines), draw=draw)

    def _content(self) -> Content:
        width = max(self.size.width, 20) if self.size.width else 200
        text = Text.from_ansi(self.text, no_wrap=True, overflow="crop")
        text.truncate(width * MAX_LINES)
        return Content.from_rich_text(text)

    def set_text(self, text: str, *, draw: bool = True) -> None:
        self.text = text
        if draw:
            self.update(self._content())
            self.stale = False
        else:
            self.stale = True

    def redraw(self) -> None:
        if getattr(self, "stale", False):
            self.update(self._content())
            self.stale = False

    @property
    def plain(self) -> str:
        """The output without colours (what a copy or a test reads)."""
        return Text.from_ansi(self.text).plain
