"""Snapshot of a branch panel running an external agent: its terminal lines drawn with
their ANSI colours, cropped (never wrapped) at the panel's width, after the row's steer."""

from __future__ import annotations

from typing import Any

from forkdeck.fork.branch_panel import BranchPanelWidget
from textual.app import App, ComposeResult

SIZE = (70, 16)
LINES = [
    "\x1b[36m[scripted]\x1b[0m starting fix (terminal: True)",
    "\x1b[1;32m✔\x1b[0m Read calc.py",
    "\x1b[33m● Edit\x1b[0m calc.py: return a - b \x1b[2m→\x1b[0m return a + b "
    "(a long line that a terminal of this width crops instead of wrapping)",
    "\x1b[31m✘ 1 test failed\x1b[0m, \x1b[32m3 passed\x1b[0m",
]


class AgentPanelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield BranchPanelWidget("a", steer="fix add()", model="agent:claude", cost_usd=None)

    def on_mount(self) -> None:
        panel = self.query_one(BranchPanelWidget)
        for line in LINES:
            panel.append_terminal(line)


def test_agent_terminal_in_a_branch_panel(snap_compare: Any) -> None:
    assert snap_compare(AgentPanelApp(), terminal_size=SIZE)
