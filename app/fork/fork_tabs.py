"""``ForkTabsWidget``: the strip of branch chips (``● a``, ``✓ b``, ..., ``+ overview``).

Why: the implementation we learn from drew chips that never appeared on screen. Here each
chip is a real one-line widget with its own region (tests check both the widget tree and the
rendered screen), the strip scrolls sideways when ten chips do not fit, and it keeps the
active chip in view. The strip never decides what "selecting" does: user clicks and keys
post :class:`ForkTabsWidget.Selected`; the owner (``ForkArea``) switches panels and calls
:meth:`ForkTabsWidget.set_active` back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import HorizontalScroll
from textual.events import Click
from textual.message import Message
from textual.widgets import Static

#: State badges, as seed 003 and issue 7 name them.
STATE_BADGES: dict[str, str] = {
    "running": "●",
    "done": "✓",
    "failed": "✗",
    "terminated": "⊘",
    "budget_exhausted": "$",
    "aggregate_budget_exhausted": "$$",
    "awaiting_approval": "⏸",
}
OVERVIEW_TEXT = "+ overview"


def chip_text(label: str | None, state: str | None) -> str:
    """What a chip shows: ``● label`` for a branch, ``+ overview`` for the overview."""
    if label is None:
        return OVERVIEW_TEXT
    return f"{STATE_BADGES.get(state or '', '?')} {label}"


class ForkChip(Static):
    """One chip: a branch (``label``) or the overview (``label`` None)."""

    class Clicked(Message):
        def __init__(self, label: str | None) -> None:
            super().__init__()
            self.label = label

    def __init__(self, label: str | None, state: str | None = None, *, id: str) -> None:
        super().__init__(chip_text(label, state), markup=False, id=id)
        self.label = label
        self.state = state
        if label is None:
            self.add_class("-overview")
        else:
            self.add_class(f"-state-{state or 'unknown'}")

    @property
    def text(self) -> str:
        return chip_text(self.label, self.state)

    def set_state(self, state: str) -> None:
        self.remove_class(f"-state-{self.state or 'unknown'}")
        self.state = state
        self.add_class(f"-state-{state}")
        self.update(self.text)

    def on_click(self, event: Click) -> None:
        event.stop()
        self.post_message(self.Clicked(self.label))


class ForkTabsWidget(HorizontalScroll, can_focus=True):
    """Branch chips plus ``+ overview``; focusable (left/right cycle, 0-9 jump)."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    BINDINGS = [
        Binding("left", "cycle(-1)", "Prev tab", show=False),
        Binding("right", "cycle(1)", "Next tab", show=False),
        *[Binding(str(n), f"jump({n})", f"Tab {n}", show=False) for n in range(10)],
    ]

    class Selected(Message):
        """The user picked a chip (click or key); ``label`` None is the overview."""

        def __init__(self, tabs: ForkTabsWidget, label: str | None) -> None:
            super().__init__()
            self.tabs = tabs
            self.label = label

    def __init__(
        self,
        labels: Iterable[str] = (),
        states: Mapping[str, str] | None = None,
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._labels: list[str] = list(labels)
        self._states: dict[str, str] = dict(states or {})
        self._active: str | None = None
        self._chips: dict[str | None, ForkChip] = {}

    def compose(self) -> ComposeResult:
        yield from self._build_chips()

    def _build_chips(self) -> list[ForkChip]:
        self._chips = {}
        chips = []
        for index, label in enumerate(self._labels):
            chip = ForkChip(label, self._states.get(label, "running"), id=f"chip-{index}")
            self._chips[label] = chip
            chips.append(chip)
        overview = ForkChip(None, id="chip-overview")
        self._chips[None] = overview
        chips.append(overview)
        for chip in chips:
            chip.set_class(chip.label == self._active, "-active")
        return chips

    # -- public API ------------------------------------------------------------------------
    @property
    def labels(self) -> list[str]:
        return list(self._labels)

    @property
    def active(self) -> str | None:
        """The active chip's label (None: the overview)."""
        return self._active

    @property
    def chips(self) -> list[ForkChip]:
        """Every chip in display order (branches, then the overview)."""
        return [self._chips[label] for label in self._labels] + [self._chips[None]]

    def chip(self, label: str | None) -> ForkChip:
        return self._chips[label]

    def state_of(self, label: str) -> str | None:
        return self._states.get(label)

    async def set_branches(
        self, labels: Iterable[str], states: Mapping[str, str] | None = None
    ) -> None:
        """Replace the chips (a new fork)."""
        self._labels = list(labels)
        self._states = dict(states or {})
        if self._active not in self._labels:
            self._active = None
        await self.remove_children()
        await self.mount_all(self._build_chips())

    def set_state(self, label: str, state: str) -> None:
        """Update one branch's badge (unknown labels are ignored: the fork moved on)."""
        self._states[label] = state
        chip = self._chips.get(label)
        if chip is not None and label is not None:
            chip.set_state(state)

    def set_active(self, label: str | None) -> None:
        """Mark ``label`` active (programmatic: posts nothing)."""
        if label is not None and label not in self._labels:
            raise ValueError(f"no branch {label!r}")
        self._active = label
        for key, chip in self._chips.items():
            chip.set_class(key == label, "-active")
        chip = self._chips.get(label)
        if chip is not None and chip.is_mounted:
            self.scroll_to_widget(chip, animate=False)

    # -- user input ------------------------------------------------------------------------
    def _order(self) -> list[str | None]:
        return [None, *self._labels]

    def action_cycle(self, step: int) -> None:
        order = self._order()
        index = order.index(self._active) if self._active in order else 0
        self._choose(order[(index + step) % len(order)])

    def action_jump(self, n: int) -> None:
        if n == 0:
            self._choose(None)
        elif 1 <= n <= len(self._labels):
            self._choose(self._labels[n - 1])

    def on_fork_chip_clicked(self, message: ForkChip.Clicked) -> None:
        message.stop()
        self._choose(message.label)

    def _choose(self, label: str | None) -> None:
        self.set_active(label)
        self.post_message(self.Selected(self, label))
