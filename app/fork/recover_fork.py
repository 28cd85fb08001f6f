"""``RecoverForkModal``: a fork left open by a crashed session is offered for merge or abort.

Why: branches keep their durable workspace branches and partial histories across a crash,
so nothing should be silently lost or silently kept. At start-up (and at ``/fork`` while a
fork is still open on disk) the chat screen passes
``branching_core.fork.list_open_forks(workspace)`` (manifest dicts) or the recovered
``ForkCoordinator`` objects; the modal lists every open fork with each branch's state and
cost. The first row of each fork *reopens* it (tabs, the recovered transcripts, diff
explorer, merge picker, follow-up turns on a branch): the safe default, since it decides
nothing. The user may also merge a branch blind or abort the fork. Esc decides later (the
fork stays on disk, ``/fork`` offers it again, and no second fork opens over it).

Dismisses with ``("reopen", fork_id)``, ``("merge", fork_id, label)``,
``("abort", fork_id)`` or None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ..common.type_ahead import TypeAheadGuard
from .fork_tabs import STATE_BADGES

RecoverChoice = tuple[str, str, str] | tuple[str, str]


@dataclass(frozen=True)
class OpenBranch:
    label: str
    state: str
    model: str | None
    cost_usd: float | None
    error: str | None
    mergeable: bool


@dataclass(frozen=True)
class OpenFork:
    fork_id: str
    branches: tuple[OpenBranch, ...]
    nested_in: str | None = None

    @classmethod
    def of(cls, fork: Any) -> OpenFork:
        """From a manifest dict (``list_open_forks``) or a recovered ``ForkCoordinator``."""
        if isinstance(fork, dict):
            branches = []
            for data in fork.get("branches", []):
                meter = data.get("meter") or {}
                known = bool(meter.get("cost_known", True))
                state = str(data.get("state", "?"))
                error = data.get("error")
                if state == "running":  # its process died: recovery makes it terminated
                    state, error = "terminated", error or "interrupted (was running)"
                branches.append(
                    OpenBranch(
                        label=str(data.get("label", "?")),
                        state=state,
                        model=(data.get("spec") or {}).get("model"),
                        cost_usd=float(meter.get("cost_usd", 0.0) or 0.0) if known else None,
                        error=error,
                        mergeable=data.get("resolution") is None
                        and bool(data.get("workspace_branch_id")),
                    )
                )
            return cls(str(fork["fork_id"]), tuple(branches), fork.get("parent_branch_id"))
        statuses = fork.inspect_branches()
        handle = fork.handle
        return cls(
            str(fork.fork_id),
            tuple(
                OpenBranch(
                    s.label,
                    s.state,
                    s.model,
                    s.cost_usd,
                    s.error,
                    s.resolution is None and s.workspace_branch_id is not None,
                )
                for s in statuses
            ),
            handle.parent_branch_id if handle is not None else None,
        )


def branch_line(branch: OpenBranch) -> str:
    cost = "$?" if branch.cost_usd is None else f"${branch.cost_usd:.4f}"
    state = f"{STATE_BADGES.get(branch.state, '?')} {branch.state.replace('_', ' ')}"
    line = f"merge {branch.label}  ·  {state}  ·  {branch.model or 'default model'}  ·  {cost}"
    if branch.error:
        line += f"  ·  {branch.error}"
    if not branch.mergeable:
        line += "  (nothing left to merge)"
    return line


class RecoverForkModal(TypeAheadGuard, ModalScreen["RecoverChoice | None"]):
    """Reopen a leftover fork, merge one of its branches, or abort it."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")  # absolute: subclasses elsewhere work
    AUTO_FOCUS = "OptionList"
    BINDINGS = [Binding("escape", "later", "Decide later")]

    def __init__(self, open_forks: Sequence[Any]) -> None:
        super().__init__()
        self.forks = [OpenFork.of(f) for f in open_forks]
        self._choices: dict[str, RecoverChoice] = {}

    def compose(self) -> ComposeResult:
        count = len(self.forks)
        noun = "fork was" if count == 1 else "forks were"
        options: list[Option | None] = []
        for fi, fork in enumerate(self.forks):
            if fi:
                options.append(None)
            where = f" (nested in branch {fork.nested_in})" if fork.nested_in else ""
            options.append(
                Option(Content(f"fork {fork.fork_id}{where}"), id=f"fork-{fi}", disabled=True)
            )
            if not fork.nested_in:  # a nested fork reopens with the fork it is nested in
                self._choices[f"reopen-{fi}"] = ("reopen", fork.fork_id)
                options.append(
                    Option(
                        Content(
                            "  reopen: tabs and transcripts, diff, merge picker, "
                            "follow-up turns"
                        ),
                        id=f"reopen-{fi}",
                    )
                )
            for bi, branch in enumerate(fork.branches):
                option_id = f"merge-{fi}-{bi}"
                self._choices[option_id] = ("merge", fork.fork_id, branch.label)
                options.append(
                    Option(
                        Content("  " + branch_line(branch)),
                        id=option_id,
                        disabled=not branch.mergeable,
                    )
                )
            self._choices[f"abort-{fi}"] = ("abort", fork.fork_id)
            options.append(
                Option(Content("  abort this fork (discard every branch)"), id=f"abort-{fi}")
            )
        with Vertical(id="dialog"):
            yield Static(f"{count} {noun} left open by an earlier session", id="title")
            yield OptionList(*options, id="choices", markup=False)
            yield Static(
                "Enter: choose · ↑↓: move · Esc: decide later (/fork offers it again)", id="hint"
            )

    @property
    def option_list(self) -> OptionList:
        return self.query_one(OptionList)

    def option_ids(self) -> list[str]:
        """Ids of the selectable rows, in display order (``reopen-F`` / ``merge-F-B`` /
        ``abort-F``)."""
        out = []
        for index in range(self.option_list.option_count):
            option = self.option_list.get_option_at_index(index)
            if option.id in self._choices and not option.disabled:
                out.append(option.id)
        return out

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        choice = self._choices.get(event.option.id or "")
        if choice is not None:
            self.dismiss(choice)

    def action_later(self) -> None:
        self.dismiss(None)
