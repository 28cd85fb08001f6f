"""``ApprovalModal``: a branch wants to run tools that need the user's approval.

Why plain data in, plain data out: the modal takes the branch label and the pending calls
(anything with ``tool_call_id``, ``tool_name`` and ``args``: the coordinator's
``ApprovalCall`` objects or dicts) and dismisses with ``{tool_call_id: approved}``, so it
can be tested and reused without a coordinator. Every call is listed with its tool name and
arguments; the highlighted call's arguments are shown in full below the list.

Keys: up/down move, ``y`` approve, ``n`` deny, space toggle, ``a`` approve all, Enter
submit (a call left undecided is denied), Esc deny all and close.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.events import Click
from textual.screen import ModalScreen
from textual.widgets import Static

ARGS_PREVIEW = 90
MARKS = {True: "✓ approve", False: "✗ deny   ", None: "? pending"}


@dataclass(frozen=True)
class PendingCall:
    """One tool call awaiting approval (normalised from whatever the caller passed)."""

    tool_call_id: str
    tool_name: str
    args: Any

    @classmethod
    def of(cls, call: Any) -> PendingCall:
        if isinstance(call, dict):
            return cls(str(call["tool_call_id"]), str(call["tool_name"]), call.get("args"))
        return cls(str(call.tool_call_id), str(call.tool_name), getattr(call, "args", None))

    @property
    def args_dict(self) -> Any:
        if isinstance(self.args, str):
            try:
                return json.loads(self.args)
            except ValueError:
                return self.args
        return self.args

    def args_text(self, *, pretty: bool = False) -> str:
        value = self.args_dict
        if isinstance(value, str):
            return value
        try:
            return json.dumps(value, indent=2 if pretty else None, ensure_ascii=False)
        except (TypeError, ValueError):
            return repr(value)


def row_text(call: PendingCall, decision: bool | None) -> str:
    args = " ".join(call.args_text().split())
    if len(args) > ARGS_PREVIEW:
        args = args[: ARGS_PREVIEW - 1] + "…"
    return f"{MARKS[decision]}  {call.tool_name}  {args}"


class ApprovalRow(Static):
    """One call with its decision mark; clicking it toggles the decision."""

    def __init__(self, index: int, call: PendingCall) -> None:
        super().__init__(Content(row_text(call, None)), classes="row -pending")
        self.index = index
        self.call = call
        self.decision: bool | None = None

    def set_decision(self, decision: bool | None) -> None:
        self.decision = decision
        self.set_class(decision is True, "-approved")
        self.set_class(decision is False, "-denied")
        self.set_class(decision is None, "-pending")
        self.update(Content(row_text(self.call, decision)))

    def on_click(self, event: Click) -> None:
        event.stop()
        modal = self.screen
        if isinstance(modal, ApprovalModal):
            modal.cursor = self.index
            modal.action_toggle_decision()


class ApprovalModal(ModalScreen[dict[str, bool]]):
    """Approve or deny each of ``calls`` made by branch ``label``."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")  # absolute: subclasses elsewhere work
    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("y", "decide(True)", "Approve"),
        Binding("n", "decide(False)", "Deny"),
        Binding("space", "toggle_decision", "Toggle"),
        Binding("a", "approve_all", "Approve all"),
        Binding("enter", "submit", "Submit"),
        Binding("escape", "deny_all", "Deny all"),
    ]

    def __init__(self, label: str, calls: Sequence[Any]) -> None:
        super().__init__()
        self.label = label
        self.calls = [PendingCall.of(c) for c in calls]
        self.cursor = 0

    def compose(self) -> ComposeResult:
        count = len(self.calls)
        noun = "tool call" if count == 1 else "tool calls"
        with Vertical(id="dialog"):
            yield Static(Content(f"Branch {self.label} asks to run {count} {noun}"), id="title")
            with VerticalScroll(id="calls"):
                for index, call in enumerate(self.calls):
                    yield ApprovalRow(index, call)
            yield Static("", id="args")
            yield Static(
                "y approve · n deny · space toggle · a approve all · "
                "Enter submit (undecided = deny) · Esc deny all",
                id="hint",
            )

    def on_mount(self) -> None:
        self._show_cursor()

    # -- read ------------------------------------------------------------------------------
    @property
    def rows(self) -> list[ApprovalRow]:
        return list(self.query(ApprovalRow))

    @property
    def decisions(self) -> dict[str, bool]:
        """What Enter would return now (undecided calls are denied)."""
        return {row.call.tool_call_id: row.decision is True for row in self.rows}

    # -- actions ---------------------------------------------------------------------------
    def _show_cursor(self) -> None:
        rows = self.rows
        if not rows:
            return
        self.cursor = max(0, min(self.cursor, len(rows) - 1))
        for row in rows:
            row.set_class(row.index == self.cursor, "-cursor")
        current = rows[self.cursor]
        self.query_one("#args", Static).update(
            Content(f"{current.call.tool_name}\n{current.call.args_text(pretty=True)}")
        )
        current.scroll_visible(animate=False)

    def action_move(self, step: int) -> None:
        self.cursor += step
        self._show_cursor()

    def action_decide(self, decision: bool) -> None:
        rows = self.rows
        if rows:
            rows[self.cursor].set_decision(decision)
            if self.cursor < len(rows) - 1:
                self.action_move(1)

    def action_toggle_decision(self) -> None:
        rows = self.rows
        if rows:
            row = rows[self.cursor]
            row.set_decision(row.decision is not True)

    def action_approve_all(self) -> None:
        for row in self.rows:
            row.set_decision(True)

    def action_submit(self) -> None:
        self.dismiss(self.decisions)

    def action_deny_all(self) -> None:
        self.dismiss({call.tool_call_id: False for call in self.calls})
