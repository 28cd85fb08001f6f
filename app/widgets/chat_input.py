"""The prompt line: an ``Input`` with shell-like history on up/down.

Why a subclass: history belongs to the input itself (what was typed, in order, with the
line being edited kept while browsing), so the screen only sees ``Submitted`` messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.binding import Binding
from textual.widgets import Input


class ChatInput(Input):
    """Input with history: up = older entry, down = newer (back to the line being typed)."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    BINDINGS = [
        Binding("up", "history_prev", "Older", show=False),
        Binding("down", "history_next", "Newer", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("placeholder", "Message, /command, >>label steer, !shell  (/help)")
        super().__init__(**kwargs)
        self.history: list[str] = []
        self._cursor: int | None = None
        self._draft = ""

    def remember(self, text: str) -> None:
        """Add a submitted line (consecutive duplicates kept once) and reset browsing."""
        if text.strip() and (not self.history or self.history[-1] != text):
            self.history.append(text)
        self._cursor = None
        self._draft = ""

    def action_history_prev(self) -> None:
        if not self.history:
            return
        if self._cursor is None:
            self._draft = self.value
            self._cursor = len(self.history)
        if self._cursor > 0:
            self._cursor -= 1
        self._show(self.history[self._cursor])

    def action_history_next(self) -> None:
        if self._cursor is None:
            return
        self._cursor += 1
        if self._cursor >= len(self.history):
            self._cursor = None
            self._show(self._draft)
        else:
            self._show(self.history[self._cursor])

    def _show(self, text: str) -> None:
        self.value = text
        self.cursor_position = len(text)
