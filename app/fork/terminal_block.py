"""``TerminalBlock``: an external agent's terminal output inside a branch panel.

An external agent (Claude Code, aider...) in a fork branch writes to a pseudo-terminal;
its lines arrive as ``BranchTerminalOutput`` events with their ANSI colours. This block
keeps the last :data:`MAX_LINES` of them and draws them with those colours, each line
cropped to the panel's width (as a terminal of that width would show it), never wrapped.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from rich.text import Text
from textual.content import Content

from .transcript_block import TranscriptBlock

MAX_LINES = 400


class TerminalBlock(TranscriptBlock):
    """The agent's terminal: plain ``text`` for copying and tests, colours on screen."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=MAX_LINES)
        super().__init__("terminal", "")

    def add_line(self, line: str, *, draw: bool = True) -> None:
        self.lines.append(line)
        self.set_text("\n".join(self.lines), draw=draw)

    def _content(self) -> Content:
        return Content.from_rich_text(Text.from_ansi(self.text, no_wrap=True, overflow="crop"))

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
