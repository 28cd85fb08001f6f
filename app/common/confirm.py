"""``ConfirmModal``: a yes/no question (terminate a branch, abort the fork...).

Why a modal of its own: Esc on a branch tab is destructive, so it always asks first. Keys:
``y`` / Enter on "Yes" confirm; ``n`` / Esc decline. Dismisses with True or False.

The focus starts on "No": an Esc typed out of habit followed by Enter (or an Enter that
was already queued behind the Esc) must not abort a whole fork. ``default=True`` is for
questions whose "yes" loses nothing.
"""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from .type_ahead import TypeAheadGuard


class ConfirmModal(TypeAheadGuard, ModalScreen[bool]):
    """Ask ``question``; True for yes, False for no."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")  # absolute: subclasses elsewhere work
    REFUSE_BURST = False  # asked for by the user's own key: only keys typed before it drop
    AUTO_FOCUS = "#no"
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "No"),
        Binding("left,right", "toggle_focus", show=False),
    ]

    def __init__(
        self,
        question: str,
        *,
        yes_label: str = "Yes",
        no_label: str = "No",
        default: bool = False,
    ) -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes_label
        self.no_label = no_label
        self.default = default

    def on_mount(self) -> None:
        # AUTO_FOCUS is a class-wide setting; a per-instance default focuses here instead
        # (the screen's auto-focus then sees a focused widget and leaves it alone).
        if self.default:
            self.set_focus(self.query_one("#yes", Button))

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.question, id="question", markup=False)
            with Horizontal(id="buttons"):
                yield Button(f"{self.yes_label} (y)", variant="error", id="yes", compact=True)
                yield Button(f"{self.no_label} (n)", id="no", compact=True)

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    def action_toggle_focus(self) -> None:
        target = "#no" if self.focused is not None and self.focused.id == "yes" else "#yes"
        self.query_one(target, Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")
