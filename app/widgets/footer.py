"""``ChatFooter``: Textual's ``Footer`` that rebuilds itself only when what it shows changes.

Why: the stock footer removes and re-mounts every key widget (then lays out the screen)
each time any binding refresh is announced -- on every focus change, every tab switch and
whenever the composer goes from empty to non-empty -- even when the keys, labels and
enabled states it draws are the same. That cost 20-50 ms per rebuild on a loaded machine,
in the path of the key that caused it. Here the shown bindings are compared first.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer


def bindings_signature(screen: Screen[Any]) -> tuple[Any, ...]:
    """What the footer draws from ``screen``'s bindings: the shown keys (and the command
    palette's), their labels, actions and enabled states. Hidden bindings are left out:
    they come and go with the focused widget without changing what is drawn."""
    palette = screen.app.COMMAND_PALETTE_BINDING
    return tuple(
        (key, binding.key, binding.action, binding.description, enabled, tooltip)
        for key, (_node, binding, enabled, tooltip) in screen.active_bindings.items()
        if binding.show or key == palette
    )


class ChatFooter(Footer):
    """A ``Footer`` that skips rebuilds which would draw the same keys."""

    _drawn: tuple[Any, ...] | None = None
    rebuilds = 0
    """How many times the keys were rebuilt (tests)."""

    def compose(self) -> ComposeResult:
        self._drawn = bindings_signature(self.screen) if self._bindings_ready else None
        self.rebuilds += 1
        yield from super().compose()

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if (
            self._drawn is not None
            and self.is_attached
            and screen is self.screen
            and bindings_signature(screen) == self._drawn
        ):
            return
        super().bindings_changed(screen)
