"""Keys typed before a dialog was on screen never answer it (issue 24.13).

Why: at start-up a user typed ``/fork`` and Enter while the app was loading; the recovery
dialog appeared in between and the queued Enter chose its first row ("reopen"). A dialog
that mixes this in notes when it became the current screen (its ``ScreenResume`` event,
on the same clock as key events). The app then drops (and says once that it dropped):

* every key created before that moment (queued type-ahead), and
* for a dialog that appears unasked (``REFUSE_BURST``: the recovery dialog at start-up),
  a typing burst that was under way as it appeared: keys that follow each other (and the
  last key before the dialog) by less than ``BURST_GAP_S``. The first key after such a
  pause is an answer; so is any key when nobody was typing as the dialog came up. A dialog
  the user's own key asked for (Esc: "terminate?") takes the next key at once: ``Esc y``
  is a deliberate answer.
"""

from __future__ import annotations

from textual import events

BURST_GAP_S = 0.5
"""A pause this long ends a typing burst: keys closer together were typed in one go, before
the dialog could be read (people type at 5-10 keys a second)."""


class TypeAheadGuard:
    """Mixin for a ``ModalScreen`` (listed before it): see the module docstring."""

    REFUSE_BURST: bool = True
    _shown_at: float | None = None
    _burst_until: float | None = None
    """While keys keep coming this close together, they belong to the burst (refused)."""
    _said_dropped: bool = False

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        if self._shown_at is not None:
            return
        self._shown_at = event.time
        last = getattr(getattr(self, "app", None), "last_key_time", None)
        if self.REFUSE_BURST and isinstance(last, float) and event.time - last < BURST_GAP_S:
            self._burst_until = last + BURST_GAP_S  # someone was typing as it appeared

    def refuses_key(self, event: events.Key) -> bool:
        """Whether ``event`` was typed before this dialog could be read (drop it)."""
        shown = self._shown_at
        if shown is None or event.time < shown:
            return True
        if self._burst_until is not None and event.time < self._burst_until:
            self._burst_until = event.time + BURST_GAP_S  # the burst goes on
            return True
        self._burst_until = None
        return False

    def dropped_key(self) -> None:
        """Say (once) that keys typed ahead were ignored, so a lost key is not a mystery."""
        if self._said_dropped:
            return
        self._said_dropped = True
        notify = getattr(self, "notify", None)
        if notify is not None:
            notify("keys typed before this dialog appeared were ignored", markup=False)


__all__ = ["BURST_GAP_S", "TypeAheadGuard"]
