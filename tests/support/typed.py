"""Narrowing helpers for tests: the engine types some values optional because they exist
only at a certain stage (a branch's directory once it started, the coordinator once a
fork is open); a test that reaches that stage asserts it here, with a readable failure,
instead of tripping over ``None`` later."""

from __future__ import annotations

from pathlib import Path

from forkdeck.forkdeck_app import ForkdeckApp

from branching_core.fork import ForkCoordinator
from branching_core.fork.runtime import BranchRuntime


def view_of(rt: BranchRuntime) -> Path:
    """The branch's directory (its view)."""
    assert rt.path is not None, f"branch {rt.label!r} has no directory yet"
    return rt.path


def coordinator_of(app: ForkdeckApp) -> ForkCoordinator:
    """The open fork's coordinator of a running ``ForkdeckApp``."""
    coordinator = app.session.coordinator
    assert coordinator is not None, "no fork is open"
    return coordinator
