"""Snapshots of the fork picker and of a fork with three branches running (fixed terminal
size, no cursor blink, fixed labels and text: nothing random, no paths, no times)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from forkdeck.chat.status_bar import StatusBar, StatusInfo
from forkdeck.fork.fork_area import ForkArea
from forkdeck.fork.fork_picker import ForkPickerModal
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Footer

from branching_core.config import Settings
from branching_core.fork import ForkCoordinator
from tests.app.fixtures_fork import (
    StreamScript,
    Turn,
    close_fork,
    make_coordinator,
    make_project,
    start_fork,
    wait_until,
)

SIZE = (100, 30)
STREAMED = {
    "alpha": ["Plan: ", "use a ", "hash table ", "keyed by ", "user id."],
    "bravo": ["Plan: ", "a sorted ", "array with ", "binary search."],
    "charlie": ["Reading ", "the code ", "first..."],
}


class PickerApp(App[None]):
    def on_mount(self) -> None:
        settings = Settings(
            model="anthropic:claude-sonnet-4-5",
            per_branch_budget_usd=0.25,
            aggregate_budget_usd=2.0,
            branch_models={1: "anthropic:claude-opus-4-6"},
        )
        self.push_screen(ForkPickerModal(3, settings, cursor_blink=False))


def test_fork_picker_snapshot(snap_compare: Any) -> None:
    async def fill(pilot: Pilot[None]) -> None:
        await pilot.pause()
        await pilot.press(*"fast")
        await pilot.press("tab", *"use a hash table keyed by user id")

    assert snap_compare(PickerApp(), terminal_size=SIZE, run_before=fill)


class RunningForkApp(App[None]):
    """Hosts a ForkArea over a real coordinator whose three branches stream some fixed text
    and then block (so the picture is stable); everything is released on unmount."""

    def __init__(self, root: Path, show: str | None, *, status: bool = False) -> None:
        super().__init__()
        self.root = root
        self.show = show
        self.status = status
        self.gate: asyncio.Event | None = None
        self.coord: ForkCoordinator | None = None

    def compose(self) -> ComposeResult:
        if self.status:
            bar = StatusBar()
            bar.show(
                StatusInfo(
                    model="anthropic:claude-sonnet-4-5",
                    backend="overlay",
                    cost_usd=0.0421,
                    input_tokens=123_456,
                    output_tokens=7_890,
                    activity="3 branches running",
                )
            )
            yield bar
        yield Footer()

    async def start(self, pilot: Pilot[None]) -> None:
        self.gate = asyncio.Event()
        script = StreamScript(
            {f"steer {label}": [Turn(chunks, gate=self.gate)] for label, chunks in STREAMED.items()}
        )
        self.coord = make_coordinator(make_project(self.root), script)
        await start_fork(self.coord, {label: f"steer {label}" for label in STREAMED})
        area = ForkArea(self.coord)
        await self.mount(area, before=self.query_one(StatusBar if self.status else Footer))
        await wait_until(
            pilot,
            lambda: all(
                area.panel(label).transcript_text.endswith("".join(chunks))
                for label, chunks in STREAMED.items()
            ),
        )
        area.select(self.show)
        area.flush()
        await pilot.pause()

    async def on_unmount(self) -> None:
        if self.coord is not None and self.gate is not None:
            await close_fork(self.coord, self.gate)


def test_three_branches_running_overview_snapshot(snap_compare: Any, tmp_path: Path) -> None:
    app = RunningForkApp(tmp_path / "project", show=None)
    assert snap_compare(app, terminal_size=SIZE, run_before=app.start)
    assert app.coord is not None and app.coord.is_resolved  # released and discarded


def test_three_branches_running_panel_snapshot(snap_compare: Any, tmp_path: Path) -> None:
    app = RunningForkApp(tmp_path / "project", show="alpha")
    assert snap_compare(app, terminal_size=SIZE, run_before=app.start)
    assert app.coord is not None and app.coord.is_resolved


def _left_open(fork_id: str) -> dict[str, Any]:
    """A manifest as ``list_open_forks`` returns it (fixed ids, costs and states)."""

    def branch(label: str, state: str, cost: float, error: str | None = None) -> dict[str, Any]:
        return {
            "branch_id": f"{fork_id}-{label}",
            "label": label,
            "state": state,
            "error": error,
            "resolution": None,
            "workspace_branch_id": f"ws-{label}",
            "spec": {"label": label, "steer": f"steer {label}", "model": None},
            "meter": {"cost_usd": cost, "cost_known": True},
        }

    return {
        "fork_id": fork_id,
        "depth": 1,
        "branches": [
            branch("alpha", "done", 0.0123),
            branch("bravo", "running", 0.0042),
            branch("charlie", "failed", 0.0, "RuntimeError: tests failed"),
        ],
    }


class RecoveryApp(App[None]):
    def on_mount(self) -> None:
        from forkdeck.fork.recover_fork import RecoverForkModal

        self.push_screen(RecoverForkModal([_left_open("f3a9c0de1234")]))


def test_recovery_dialog_snapshot(snap_compare: Any) -> None:
    """Issue 13.7: the dialog offers "reopen" first (the default), then merge/abort."""
    assert snap_compare(RecoveryApp(), terminal_size=SIZE)


def test_fork_view_at_80x24_snapshot(snap_compare: Any, tmp_path: Path) -> None:
    """Issue 13.21: at 80x24 the overview's rows, its title and the status line fit (the
    status line drops field names and compacts tokens; nothing is cut mid-word)."""
    app = RunningForkApp(tmp_path / "project", show=None, status=True)
    assert snap_compare(app, terminal_size=(80, 24), run_before=app.start)


def test_fork_picker_at_80x24_snapshot(snap_compare: Any) -> None:
    assert snap_compare(PickerApp(), terminal_size=(80, 24))
