"""Which test command the merge review runs, and where it came from, as one line.

Why: the judge and the merge picker run a test command in every branch; when none is
configured it is detected from the workspace (``pyproject.toml`` → pytest, ``package.json``
→ npm/pnpm/yarn, ``Cargo.toml``, ``go.mod``, ``Makefile``). The user should see which one
(and from which file) before trusting the ✓/✗ it produces, and know how to change it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from branching_core.review import DetectedTestCommand, choose_test_command

if TYPE_CHECKING:
    from ..session import ChatSession


def describe_tests(detected: DetectedTestCommand | None) -> str:
    """``tests: `pytest -q` (detected from pyproject.toml)`` / ``(from [review]
    test_command)`` / ``tests: none detected (set [review] test_command)``."""
    if detected is None:
        return "tests: none detected (set [review] test_command)"
    if detected.source == "config":
        return f"tests: `{detected.command}` (from [review] test_command)"
    return f"tests: `{detected.command}` (detected from {detected.source})"


def detect_for(configured: str | None, root: Path | str) -> DetectedTestCommand | None:
    """The configured command, else the one detected at ``root``; ``""`` turns tests off
    (as for the judge)."""
    if configured is not None and not configured.strip():
        return None
    return choose_test_command(configured, root)


async def session_tests(session: ChatSession) -> DetectedTestCommand | None:
    """:func:`detect_for` the session's workspace (off the event loop: it reads files)."""
    root = session.workspace.path if session.workspace is not None else session.root
    return await asyncio.to_thread(detect_for, session.settings.test_command, root)


__all__ = ["describe_tests", "detect_for", "session_tests"]
