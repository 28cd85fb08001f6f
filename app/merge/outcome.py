"""The merge workflow's pieces that need no screen: the conflict refusal, the notice after
a merge, one line per branch test result, and the diff report built off the event loop.

Why apart from ``app.session``: the session is the controller; these are what the merge
picker, the chat screen and tests share about a merge's outcome, each testable alone.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from branching_core.fork import MergeResult

    from .session_port import ForkHolder


class MergeConflict(RuntimeError):
    """The picked branch changed paths the parent changed too since the fork."""

    def __init__(self, label: str, paths: list[str]) -> None:
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        super().__init__(
            f"branch {label} was not merged: {shown} changed here since the fork. Nothing "
            "changed (files, chat, fork): pick another branch, abort the fork, or undo "
            "those changes and /merge again"
        )
        self.label = label
        self.paths = paths


def test_line(result: Any) -> str:
    """One line for a ``BranchTestResult``: ``tests ✓ 12/12 passed`` / ``tests ✗ 3 failed``."""
    if result.source == "none":
        return f"tests: no result ({result.error or ('timed out' if result.timed_out else '?')})"
    if result.source == "exit_code":
        return f"tests {'✓' if result.ok else '✗'} `{result.command}` exit {result.exit_code}"
    if result.collected == 0:
        return "tests ✗ none collected"
    bad = result.failed + result.errors
    mark = "✓" if result.ok else "✗"
    line = f"tests {mark} {result.passed}/{result.total} passed"
    return line + (f", {bad} failed" if bad else "")


def merge_summary(result: MergeResult) -> tuple[str, SeverityLevel]:
    """The notice after a merge and its severity: what landed, what did not, and whether
    the branch's conversation became the chat's."""
    written = len(result.applied_paths)
    deleted = len(result.deleted_paths)
    what = f"merged branch {result.winner_label}"
    if result.action == "combine":  # 17.1: taken from several branches
        what = f"merged the combination (history from {result.winner_label})"
    lines = [
        f"{what}: {written} path{'s' if written != 1 else ''} "
        f"written, {deleted} deleted"
        + (
            "; the chat keeps its own conversation (see the conflicts)"
            if result.conflicts
            else "; its conversation is now the chat"
        )
    ]
    if result.conflicts:
        lines.append(
            "conflicts (changed here since the fork, left as they are): "
            + ", ".join(result.conflicts)
        )
    if result.errors:
        lines.append("not applied: " + ", ".join(f"{e.path} ({e.error})" for e in result.errors))
    lines.extend(getattr(result, "git_notes", []))  # issue 25: kept commits, landing commit
    return "\n".join(lines), "warning" if result.conflicts or result.errors else "information"


async def build_report(session: ForkHolder, paths: list[str] | None = None) -> Any:
    """The live fork's ``BranchDiffReport`` (the merge picker and diff explorer show it).

    The report reads every touched file of every branch and diffs them (synchronous work of
    up to a few hundred ms with ten branches), so it runs in a worker thread: the event
    loop keeps drawing streaming branches and echoing keys meanwhile (issue 15.5).
    """
    coordinator = session.coordinator
    if coordinator is None or coordinator.fork_id is None:
        raise RuntimeError("no fork is open")
    return await asyncio.to_thread(coordinator.diff_report, paths or None)
