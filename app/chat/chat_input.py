"""The composer: a multi-line ``TextArea`` where Enter sends and every key keeps its order.

Why a ``TextArea`` subclass and why it handles keys itself:

* A one-line ``Input`` keeps only the first line of a paste; a traceback or a
  ``write PATH ... end`` block needs every line. Enter sends; shift+enter, alt+enter and
  ctrl+j insert a newline (tmux and most terminals send shift+enter as a plain Enter, so
  ctrl+j is the one that works everywhere); a bracketed paste keeps every line.
* Textual resolves a *binding* only after the unhandled ``Key`` event has bubbled up
  through every ancestor's message queue to the app, while printable keys are inserted
  by the focused widget at once. Keys that arrive in one read (a fast typist, a paste
  without bracketed paste, tmux ``send-keys``) therefore ran out of order: the Enter of
  ``!echo one⏎!echo two`` was applied after ``!echo two`` had been typed, so both lines
  went out as one. Here Enter, newline, Esc-with-text and every binding of this widget
  are run inside :meth:`_on_key`, in the order the keys arrived; Enter takes the text
  typed before it, clears the composer itself and posts :class:`Submitted` with that
  text, so later keys stay in the composer and the screen never clears anything.
* History (up on the first line = older, down on the last line = newer, the draft kept
  while browsing) and ``/command`` completion (Tab) belong to the composer, so the screen
  only sees ``Submitted``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual import events
from textual.message import Message
from textual.widgets import TextArea

NEWLINE_KEYS = frozenset({"shift+enter", "alt+enter", "ctrl+j", "ctrl+enter"})
"""Keys that insert a line break instead of sending (ctrl+j is the portable one)."""

MANY_LINES = 3
"""From this many lines on the composer says how many lines it holds (a large paste)."""

PLACEHOLDER = "Message, /command, >>label steer, !shell  (/help)"


class ChatInput(TextArea):
    """Multi-line composer with ordered keys, history and slash completion (see module doc)."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    class Submitted(Message):
        """Enter was pressed: ``value`` is exactly what was typed before it."""

        def __init__(self, chat_input: ChatInput, value: str) -> None:
            super().__init__()
            self.chat_input = chat_input
            self.value = value

        @property
        def control(self) -> ChatInput:
            return self.chat_input

    def __init__(self, *, commands: Iterable[str] = (), **kwargs: Any) -> None:
        kwargs.setdefault("placeholder", PLACEHOLDER)
        kwargs.setdefault("soft_wrap", True)
        kwargs.setdefault("show_line_numbers", False)
        kwargs.setdefault("highlight_cursor_line", False)
        super().__init__(**kwargs)
        self.commands: list[str] = sorted(commands)
        self.passthrough_keys: frozenset[str] = frozenset()
        """Printable keys the composer leaves to the screen's bindings (alt+N glyphs in a fork)."""
        self.sent: list[str] = []
        self._cursor: int | None = None
        self._draft = ""

    # -- value ------------------------------------------------------------------------------
    @property
    def value(self) -> str:
        """The composer's text (all lines)."""
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self._show(text)

    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    # -- keys, in arrival order -------------------------------------------------------------
    def check_consume_key(self, key: str, character: str | None = None) -> bool:
        # Textual drops bindings of ancestors for keys the focused widget would consume.
        if key in self.passthrough_keys:
            return False
        return super().check_consume_key(key, character)

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        handled = True
        if self.read_only:
            handled = False
        elif key == "enter":
            self.submit()
        elif key in NEWLINE_KEYS:
            self._replace_via_keyboard("\n", *self.selection)
        elif key == "escape":
            # Esc with text only clears the text; without text it goes on to the screen
            # (stop a turn, terminate a branch...).
            handled = bool(self.text)
            if handled:
                self._show("")
                self._cursor = None
        elif event.is_printable:
            handled = False
        else:
            handled = await self._run_own_binding(key)
        if handled:
            event.stop()
            event.prevent_default()
            self._restart_blink()
        # Not handled: TextArea._on_key (next in the MRO) inserts printable keys; anything
        # else bubbles to the screen and the app.

    async def _run_own_binding(self, key: str) -> bool:
        """Run this widget's (non-priority) binding for ``key`` now, not after bubbling."""
        for binding in self._bindings.key_to_bindings.get(key, ()):
            if binding.priority:
                continue
            if await self.app.run_action(binding.action, self):
                return True
        return False

    def submit(self) -> str:
        """Send what is in the composer now: clear it, remember it, post ``Submitted``."""
        text = self.text
        self._show("")
        self.remember(text)
        self.post_message(self.Submitted(self, text))
        return text

    # -- history ----------------------------------------------------------------------------
    def remember(self, text: str) -> None:
        """Add a submitted text (consecutive duplicates kept once) and reset browsing."""
        if text.strip() and (not self.sent or self.sent[-1] != text):
            self.sent.append(text)
        self._cursor = None
        self._draft = ""

    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self.sent:
            self.action_history_prev()
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        last_row = self.document.line_count - 1
        if not select and self.cursor_location[0] == last_row and self._cursor is not None:
            self.action_history_next()
            return
        super().action_cursor_down(select)

    def action_history_prev(self) -> None:
        if not self.sent:
            return
        if self._cursor is None:
            self._draft = self.text
            self._cursor = len(self.sent)
        if self._cursor > 0:
            self._cursor -= 1
        self._show(self.sent[self._cursor])

    def action_history_next(self) -> None:
        if self._cursor is None:
            return
        self._cursor += 1
        if self._cursor >= len(self.sent):
            self._cursor = None
            self._show(self._draft)
        else:
            self._show(self.sent[self._cursor])

    # -- slash completion -------------------------------------------------------------------
    def completions(self) -> list[str]:
        """Commands the text so far could be (``/fo`` -> ``/fork``, ``/fork-branches``...)."""
        text = self.text
        if not text.startswith("/") or " " in text or "\n" in text:
            return []
        return [c for c in self.commands if c.startswith(text[1:])]

    def complete(self) -> bool:
        """Tab: extend ``/prefix`` to the longest common prefix (a lone match gets a space).

        False (nothing done) when the text is not a partial command, so Tab keeps its
        other meaning (next fork tab).
        """
        matches = self.completions()
        if not matches:
            return False
        if len(matches) == 1:
            self._show(f"/{matches[0]} ")
            return True
        common = matches[0]
        for match in matches[1:]:
            while not match.startswith(common):
                common = common[:-1]
        if len(common) + 1 > len(self.text):
            self._show(f"/{common}")
        return True

    # -- hints ------------------------------------------------------------------------------
    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        # Not stopped: the screen may listen too.
        self.update_hint()

    def update_hint(self) -> None:
        """Border hint: how many lines a large paste holds, or the commands Tab completes to."""
        lines = self.document.line_count
        matches = self.completions() if self.text not in ("", "/") else []
        if lines >= MANY_LINES:
            self.border_subtitle = f"{lines} lines · enter sends · ctrl+j newline"
        elif matches and len(matches) <= 8:
            self.border_subtitle = "tab: " + " ".join(f"/{m}" for m in matches)
        else:
            self.border_subtitle = ""
