"""``ForkPickerModal``: ``/fork`` asks for N branches (label, steer, model, budget) at once.

Why: every value the user set with ``/fork-branches``, ``/fork-budget`` and ``/fork-model``
shows up prefilled, so a fork is usually just "type the steers, press Enter". The first
label field is focused as the modal is pushed (``AUTO_FOCUS``, applied by ``push_screen``
itself, before the modal is even mounted), so keys typed right after opening land in it:
the picker we learn from lost the first keys typed into it (without ``AUTO_FOCUS`` the
first key goes to the bare screen and is dropped; the tests check exactly this). Bad input
is reported on one inline line (``row 2: label 'a' is used twice``) and the modal stays open.

The row count is this fork's only: ``ctrl+n`` adds a row, ``ctrl+r`` removes the focused
one (the ``+ row`` / ``- row`` buttons do the same), and nothing is written to
``config.toml`` (only ``/fork-branches N`` changes the default count).

Given an ``estimator`` (issue 17.5: ``coord.estimate`` over the chat's history), an
``est. $`` column shows each row's estimated cost and a line under the rows the total;
a row whose budget is below its estimate is flagged ``!``. The estimate is recomputed
(in a worker thread, after a short pause in typing) whenever a row, model, budget or the
row count changes, so typing never waits for it.
"""

from __future__ import annotations

import asyncio
import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from branching_core.config import Settings

from ..review.fork_estimate import (
    Estimator,
    RowValues,
    cost_cell,
    lenient_specs,
    total_text,
)

if TYPE_CHECKING:
    from branching_core.fork import BranchSpec, ForkEstimate

ESTIMATE_PAUSE_S = 0.15
"""Typing pause before the estimate is recomputed (each key would otherwise start one)."""

# Same rule as branching_core.config for [model] / [fork.models] values.
_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*:\S+$")
_BARE_MODELS = frozenset({"offline", "test"})
_LABEL_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
STEER_PLACEHOLDER = "empty: the same task again"
"""Drawn dim and italic (fork_picker.tcss), so it never reads as a typed value: a user took
the old "what makes this branch different" for a filled cell and met ``steer is empty``."""


@dataclass
class ForkRequest:
    """What the picker returns: the branch specs and the fork-wide budget (None: no cap)."""

    specs: list[BranchSpec] = field(default_factory=list)
    aggregate_budget_usd: float | None = None


class PickerError(ValueError):
    """One invalid field: ``message`` is the line shown, ``field_id`` the input to focus."""

    def __init__(self, message: str, field_id: str) -> None:
        super().__init__(message)
        self.field_id = field_id


def default_label(index: int) -> str:
    """``a``, ``b``, ... ``z``, then ``b27``, ``b28``... (0-based ``index``)."""
    letters = string.ascii_lowercase
    return letters[index] if index < len(letters) else f"b{index + 1}"


def format_usd(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def parse_budget(text: str, what: str, field_id: str) -> float | None:
    """``''`` -> None; ``0.25`` / ``$0.25`` -> 0.25; anything else -> PickerError."""
    raw = text.strip().removeprefix("$").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise PickerError(f"{what}: {text.strip()!r} is not a number", field_id) from None
    if not math.isfinite(value) or value <= 0:
        raise PickerError(f"{what}: must be greater than 0, got {text.strip()}", field_id)
    return value


def check_model(text: str, what: str, field_id: str,
                agents: Mapping[str, object] | None = None) -> str | None:
    """A row's model: ``provider:name``, a bare built-in, or ``agent:<profile>`` (an
    external CLI agent: a built-in profile, ``cmd:...`` or one of ``agents``)."""
    raw = text.strip()
    if not raw:
        return None
    if raw.startswith("agent:"):  # an external agent profile (branching_core.external)
        from branching_core.external import ProfileError, resolve_row

        try:
            resolve_row(raw.removeprefix("agent:"), agents)  # type: ignore[arg-type]
        except ProfileError as exc:
            raise PickerError(f"{what}: {exc}", field_id) from None
        return raw
    if raw in _BARE_MODELS or _MODEL_RE.match(raw):
        return raw
    raise PickerError(
        f"{what}: model {raw!r} needs a provider prefix, e.g. anthropic:claude-sonnet-4-5",
        field_id,
    )


class ForkPickerModal(ModalScreen["ForkRequest | None"]):
    """N rows of label / steer / model / budget plus the aggregate budget.

    ``defaults`` prefills the rows: ``branch_models[slot]`` (1-based) in the model column,
    ``per_branch_budget_usd`` in every budget, ``aggregate_budget_usd`` below. An empty
    model means "the default model" (shown as the placeholder, ``default_model`` or
    ``defaults.model``). Dismisses with a :class:`ForkRequest`, or None on Esc / Cancel.
    """

    CSS_PATH = Path(__file__).with_suffix(".tcss")  # absolute: subclasses elsewhere work
    AUTO_FOCUS = "#label-1"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Fork", show=False),
        # Priority: focus must move before the keys queued behind Tab are dispatched,
        # or a fast typist's (or a paste's) next characters land in the field just left.
        Binding("tab", "move_focus(1)", "Next field", show=False, priority=True),
        Binding("shift+tab", "move_focus(-1)", "Previous field", show=False, priority=True),
        Binding("ctrl+n", "add_row", "Add row", show=False, priority=True),
        Binding("ctrl+r", "remove_row", "Remove row", show=False, priority=True),
    ]

    def __init__(
        self,
        n: int,
        defaults: Settings | None = None,
        *,
        labels: Sequence[str] | None = None,
        default_model: str | None = None,
        cursor_blink: bool = True,
        budget_note: str | None = None,
        max_rows: int | None = None,
        estimator: Estimator | None = None,
    ) -> None:
        super().__init__()
        self.estimator = estimator
        self.estimate: ForkEstimate | None = None
        """The last estimate shown (None: none yet, or no estimator)."""
        if n < 1:
            raise ValueError(f"a fork needs at least one branch, got {n}")
        self.n = n
        self.max_rows = max_rows if max_rows is not None else (defaults or Settings()).max_branches
        self.defaults = defaults or Settings()
        self.labels = list(labels or [default_label(i) for i in range(n)])
        self.default_model = default_model or self.defaults.model
        self.cursor_blink = cursor_blink
        self.budget_note = budget_note
        """How budgets are enforced for this model (listed price, user price or token cap)."""

    # -- layout ----------------------------------------------------------------------------
    def _input(self, value: str, placeholder: str, id: str) -> Input:
        entry = Input(value, placeholder, id=id, compact=True)
        entry.cursor_blink = self.cursor_blink
        return entry

    def _row(self, slot: int) -> list[Static | Input]:
        """The cells of row ``slot`` (1-based), prefilled from the settings (five, plus the
        estimate cell with an estimator)."""
        settings = self.defaults
        label = self.labels[slot - 1] if slot <= len(self.labels) else default_label(slot - 1)
        cells: list[Static | Input] = [
            Static(str(slot), classes="slot", id=f"slot-{slot}"),
            self._input(label, "label", f"label-{slot}"),
            self._input("", STEER_PLACEHOLDER, f"steer-{slot}"),
            self._input(settings.branch_models.get(slot, ""), "(default)", f"model-{slot}"),
            self._input(format_usd(settings.per_branch_budget_usd), "none", f"budget-{slot}"),
        ]
        if self.estimator is not None:
            cells.append(Static(cost_cell(None), classes="estimate", id=f"est-{slot}"))
        return cells

    def compose(self) -> ComposeResult:
        settings = self.defaults
        with Vertical(id="dialog"):
            yield Static(f"Fork into {self.n} branches", id="title")
            headings = ["#", "label", "steer", "model", "budget $"]
            if self.estimator is not None:
                headings.append("est. $")
            grid = Grid(id="grid", classes="-estimated" if self.estimator else "")
            with VerticalScroll(id="rows"), grid:
                for heading in headings:
                    yield Static(heading, classes="heading")
                for slot in range(1, self.n + 1):
                    yield from self._row(slot)
            # a long steer, wrapped in full while it is typed (its cell shows only a window)
            yield Static("", id="steer-full", markup=False)
            if self.estimator is not None:
                yield Static(total_text(None), id="estimate-total")
            # A placeholder is cut at the field's width, so the default model is named here.
            yield Static(
                f"(default) = {self.default_model or 'the chat model'}"
                " · an empty budget means no budget"
                + (f"\n{self.budget_note}" if self.budget_note else ""),
                id="defaults",
                markup=False,
            )
            with Horizontal(id="aggregate-row"):
                yield Static("aggregate budget $", id="aggregate-label")
                yield self._input(format_usd(settings.aggregate_budget_usd), "none", "aggregate")
            yield Static("", id="error")
            with Horizontal(id="buttons"):
                yield Static(
                    "Enter: fork · Tab: next field · ctrl+n/ctrl+r: add/remove row · Esc: cancel"
                    " · all steers empty: best-of-N on the last task",
                    id="hint",
                )
                yield Button("+ row", id="add-row", compact=True)
                yield Button("- row", id="remove-row", compact=True)
                yield Button("Fork", variant="primary", id="fork", compact=True)
                yield Button("Cancel", id="cancel", compact=True)

    # -- values ----------------------------------------------------------------------------
    def _value(self, field_id: str) -> str:
        return self.query_one(f"#{field_id}", Input).value

    def build_request(self) -> ForkRequest:
        """The request the fields describe now; PickerError for the first bad field."""
        from branching_core.fork import BranchSpec

        specs: list[BranchSpec] = []
        seen: dict[str, int] = {}
        for slot in range(1, self.n + 1):
            label = self._value(f"label-{slot}").strip()
            where = f"row {slot}"
            if not label:
                raise PickerError(f"{where}: label is empty", f"label-{slot}")
            if not _LABEL_RE.match(label):
                raise PickerError(
                    f"{where}: label {label!r} may only use letters, digits, '_', '-' and '.'",
                    f"label-{slot}",
                )
            if label in seen:
                raise PickerError(
                    f"{where}: label {label!r} is already used by row {seen[label]}",
                    f"label-{slot}",
                )
            seen[label] = slot
            steer = self._value(f"steer-{slot}").strip()
            model = check_model(self._value(f"model-{slot}"), where, f"model-{slot}",
                                getattr(self.defaults, "agents", None))
            budget = parse_budget(
                self._value(f"budget-{slot}"), f"{where} budget", f"budget-{slot}"
            )
            specs.append(BranchSpec(label=label, steer=steer, model=model, budget_usd=budget))
        self._check_steers(specs)
        aggregate = parse_budget(self._value("aggregate"), "aggregate budget", "aggregate")
        return ForkRequest(specs=specs, aggregate_budget_usd=aggregate)

    @staticmethod
    def _check_steers(specs: list[BranchSpec]) -> None:
        """Every steer empty (best-of-N: the last task re-sampled in each branch) or every
        steer given: an empty row beside steered ones would have nothing to do."""
        empty = [slot for slot, spec in enumerate(specs, start=1) if not spec.steer]
        given = [slot for slot, spec in enumerate(specs, start=1) if spec.steer]
        if empty and given:
            raise PickerError(
                f"row {empty[0]}: steer is empty but row {given[0]} has one: leave all "
                "empty (the same task again) or fill each",
                f"steer-{empty[0]}",
            )

    @property
    def error_text(self) -> str:
        """The inline error line ('' when there is none)."""
        return str(self.query_one("#error", Static).content)

    def _show_error(self, exc: PickerError | None) -> None:
        for entry in self.query(Input):
            entry.remove_class("-invalid")
        error = self.query_one("#error", Static)
        if exc is None:
            error.update("")
            error.remove_class("-shown")
            return
        error.update(str(exc))
        error.add_class("-shown")
        bad = self.query_one(f"#{exc.field_id}", Input)
        bad.add_class("-invalid")
        bad.focus()

    # -- actions ---------------------------------------------------------------------------
    def action_submit(self) -> None:
        try:
            request = self.build_request()
        except PickerError as exc:
            self._show_error(exc)
            return
        self._show_error(None)
        self.dismiss(request)

    def action_move_focus(self, step: int) -> None:
        if step > 0:
            self.focus_next()
        else:
            self.focus_previous()

    def action_cancel(self) -> None:
        self.dismiss(None)

    FIELDS = ("label", "steer", "model", "budget")

    async def action_add_row(self) -> None:
        """One more branch for this fork only (config.toml is not touched)."""
        if self.n >= self.max_rows:
            self._show_error(
                PickerError(f"at most {self.max_rows} branches (max_branches)", "label-1")
            )
            return
        used = {
            entry.value.strip()
            for entry in self.query(Input)
            if entry.id and entry.id.startswith("label-")
        }
        fresh = next(
            default_label(i) for i in range(self.max_rows + 27) if default_label(i) not in used
        )
        self.n += 1
        self.labels[self.n - 1 :] = [fresh]
        cells = self._row(self.n)
        await self.query_one("#grid", Grid).mount_all(cells)
        self._update_title()
        cells[1].focus()

    async def action_remove_row(self) -> None:
        """Drop the focused row (or the last one); the rows below move up."""
        if self.n <= 1:
            self._show_error(PickerError("a fork needs at least one branch", "label-1"))
            return
        focused = self.focused.id if self.focused is not None else None
        slot = self.n
        if focused and "-" in focused and focused.rsplit("-", 1)[1].isdigit():
            slot = min(int(focused.rsplit("-", 1)[1]), self.n)
        for row in range(slot, self.n):
            for name in self.FIELDS:
                below = self.query_one(f"#{name}-{row + 1}", Input).value
                self.query_one(f"#{name}-{row}", Input).value = below
        cells = ("slot", *self.FIELDS, *(("est",) if self.estimator is not None else ()))
        for name in cells:
            await self.query_one(f"#{name}-{self.n}").remove()
        self.n -= 1
        self._update_title()
        self.query_one(f"#label-{min(slot, self.n)}", Input).focus()

    def _update_title(self) -> None:
        self.query_one("#title", Static).update(f"Fork into {self.n} branches")
        self._show_error(None)
        self.schedule_estimate()

    # -- estimate (17.5) -------------------------------------------------------------------
    def on_mount(self) -> None:
        # is_mounted turns true only after the mount handlers: estimate on the next refresh
        self.call_after_refresh(self.schedule_estimate, 0.0)

    @on(Input.Changed)
    def _field_changed(self, event: Input.Changed) -> None:
        self.schedule_estimate()  # labels too: the total line names flagged rows
        self._show_steer(event.input)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._show_steer(event.widget)

    def _show_steer(self, widget: object) -> None:
        """The focused steer in full, wrapped under the rows, once it outgrows its cell."""
        for line in self.query("#steer-full").results(Static):
            text = ""
            field_id = widget.id or "" if isinstance(widget, Input) else ""
            if isinstance(widget, Input) and field_id.startswith("steer-"):
                width = widget.content_region.width or widget.size.width
                if len(widget.value) >= max(width - 1, 1):
                    text = f"steer {field_id.removeprefix('steer-')}: {widget.value}"
            line.update(text)
            line.set_class(bool(text), "-shown")

    def schedule_estimate(self, pause: float = ESTIMATE_PAUSE_S) -> None:
        """Recompute the estimate for the rows as they are now (the newest call wins)."""
        if self.estimator is None or not self.is_mounted:
            return
        rows = [
            RowValues(
                self._value(f"label-{slot}"),
                self._value(f"steer-{slot}"),
                self._value(f"model-{slot}"),
                self._value(f"budget-{slot}"),
            )
            for slot in range(1, self.n + 1)
        ]
        aggregate = self._value("aggregate")
        # a callable, not a coroutine: a worker cancelled before it starts leaves nothing
        # un-awaited behind
        self.run_worker(
            partial(self._estimate, rows, aggregate, pause), group="fork-estimate", exclusive=True
        )

    async def _estimate(self, rows: list[RowValues], aggregate: str, pause: float) -> None:
        estimator = self.estimator
        if estimator is None:
            return
        if pause:
            await asyncio.sleep(pause)  # a newer key press cancels this worker here
        try:
            aggregate_usd = parse_budget(aggregate, "aggregate budget", "aggregate")
        except PickerError:
            aggregate_usd = None
        try:
            estimate = await asyncio.to_thread(estimator, lenient_specs(rows), aggregate_usd)
        except Exception as exc:  # an estimate never blocks the fork: say why it is missing
            self._show_total(Text(f"no estimate: {exc}", style="dim"))
            return
        self.show_estimate(estimate)

    def _show_total(self, text: Text) -> None:
        # the picker may have been dismissed while the estimate was computed: nothing to show
        for total in self.query("#estimate-total").results(Static):
            total.update(text)

    def show_estimate(self, estimate: ForkEstimate) -> None:
        """Fill the ``est. $`` cells (in row order) and the total line."""
        self.estimate = estimate
        for slot in range(1, self.n + 1):
            branch = estimate.branches[slot - 1] if slot <= len(estimate.branches) else None
            for cell in self.query(f"#est-{slot}").results(Static):
                cell.update(cost_cell(branch))
        self._show_total(total_text(estimate))

    @on(Button.Pressed, "#add-row")
    async def _add_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        await self.action_add_row()

    @on(Button.Pressed, "#remove-row")
    async def _remove_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        await self.action_remove_row()

    @on(Input.Submitted)
    def _enter(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    @on(Button.Pressed, "#fork")
    def _fork_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_cancel()
