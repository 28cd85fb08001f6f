"""Inject a fault at a named commit step, in this process (``workspace.faults``).

What ``test_commit_faults`` and ``test_commit_reaper`` share: the step and the fault are
set in the environment (``FORKDECK_CRASH_AT``, ``FORKDECK_CRASH_WITH``), the once-per-
process record of fired faults is reset so this commit meets its fault again, and a
commit run under them is observed as the caller sees it (the exception it raised).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from branching_core import Branch, CommitError, Workspace
from branching_core.workspace.faults import CRASH_ENV, CRASH_WITH_ENV, reset_injected_faults


def inject_fault(monkeypatch: pytest.MonkeyPatch, step: str, fault: str) -> None:
    """Make the next commit step named ``step`` meet ``fault`` (``interrupt``, ``eio``...)."""
    monkeypatch.setenv(CRASH_WITH_ENV, fault)
    reset_injected_faults()
    monkeypatch.setenv(CRASH_ENV, step)


def commit_under_fault(
    ws: Workspace,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
    fault: str,
    edit: Callable[[Path], None],
    name: str = "faulty",
) -> tuple[Branch, BaseException | None]:
    """Commit a branch edited by ``edit`` (``with ws.branch(name)``) while ``fault``
    strikes at ``step``; returns the branch and what the commit raised (a
    ``KeyboardInterrupt`` or ``CommitError``, or None). The fault is off again after."""
    inject_fault(monkeypatch, step, fault)
    raised: BaseException | None = None
    branch = ws.branch(name)
    try:
        with branch:
            edit(branch.path)
    except (KeyboardInterrupt, CommitError) as exc:
        raised = exc
    monkeypatch.delenv(CRASH_ENV)
    return branch, raised


__all__ = ["commit_under_fault", "inject_fault"]
