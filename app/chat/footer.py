"""``ChatFooter``: Textual's ``Footer`` that rebuilds itself only when what it shows changes.

Why: the stock footer removes and re-mounts every key widget (then lays out the screen)
each time any binding refresh is announced -- on every focus change, every tab switch and
whenever the composer goes from empty to non-empty -- even when the keys, labels and
enabled states it draws are the same. That cost 20-50 ms per rebuild on a loaded machine,
in the path of the key that caused it. Here the shown bindings are compared first; when
only labels or actions changed (Esc going from "Abort fork" to "Terminate branch" on a
tab switch), the existing key widgets are relabelled in place instead of re-mounted.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


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


def shown_keys(screen: Screen[Any]) -> list[tuple[Binding, bool, str]]:
    """The (binding, enabled, tooltip) the footer draws, one per action, in its order
    (as ``Footer.compose`` picks them: the first binding of each action)."""
    first: dict[str, tuple[Binding, bool, str]] = {}
    for _node, binding, enabled, tooltip in screen.active_bindings.values():
        if binding.show and binding.action not in first:
            first[binding.action] = (binding, enabled, tooltip)
    return list(first.values())


class ChatFooter(Footer):
    """A ``Footer`` that skips rebuilds which would draw the same keys."""

    _drawn: tuple[Any, ...] | None = None
    rebuilds = 0
    """How many times the keys were re-mounted (tests)."""

    def compose(self) -> ComposeResult:
        self._drawn = bindings_signature(self.screen) if self._bindings_ready else None
        self.rebuilds += 1
        yield from super().compose()

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if self._drawn is not None and self.is_attached and screen is self.screen:
            signature = bindings_signature(screen)
            if signature == self._drawn:
                return
            if screen.app.app_focus and self._relabel(screen, signature):
                self._drawn = signature
                return
        super().bindings_changed(screen)

    def _relabel(self, screen: Screen[Any], signature: tuple[Any, ...]) -> bool:
        """Update the mounted key widgets in place when the same number of plain keys is
        shown and the command palette's key is unchanged; False: rebuild instead."""
        assert self._drawn is not None
        palette = screen.app.COMMAND_PALETTE_BINDING
        if [s for s in signature if s[0] == palette] != [s for s in self._drawn if s[0] == palette]:
            return False
        widgets = list(self.children)
        keys = [w for w in widgets if isinstance(w, FooterKey)]
        if len(keys) != len(widgets):
            return False  # groups (KeyGroup, FooterLabel): leave those to Footer
        plain = [k for k in keys if not k.has_class("-command-palette")]
        entries = shown_keys(screen)
        if len(entries) != len(plain) or any(b.group is not None for b, _, _ in entries):
            return False
        for widget, (binding, enabled, tooltip) in zip(plain, entries, strict=True):
            widget.key = binding.key
            widget.key_display = screen.app.get_key_display(binding)
            widget.description = binding.description
            widget.action = binding.action
            widget.tooltip = tooltip or None
            widget.disabled = not enabled
            widget.refresh(layout=True)  # the label's width may change
        return True
