"""One-line notices for the user's own edits in a branch's mirror directory (issue 17.2).

The engine applies what the user writes under ``.pydantic-deep/forks/<id>/branches/<label>/``
to that branch and publishes ``BranchUserEdited`` / ``BranchEditConflict`` /
``BranchEditRefused``; the chat screen writes these lines to the fork log strip, so the
user sees that the branch got their edit, or why it did not.
"""

from __future__ import annotations

from typing import Any, Literal

Severity = Literal["information", "warning", "error"]

EDIT_EVENTS = frozenset({"BranchUserEdited", "BranchEditConflict", "BranchEditRefused"})


def _short(path: str) -> str:
    """``.pydantic-deep/forks/...`` instead of the whole absolute path (the workspace's)."""
    at = path.find("/.pydantic-deep/")
    return path[at + 1 :] if at >= 0 else path


def edit_notice(event: Any) -> tuple[str, Severity] | None:
    """The fork-log line for an edit event, or None for any other event."""
    kind = type(event).__name__
    if kind == "BranchUserEdited":
        summaries = ", ".join(event.summaries) or ", ".join(event.paths)
        return (
            f"✎ you edited {summaries} in branch {event.label}; "
            "it reads your change at its next request",
            "information",
        )
    if kind == "BranchEditConflict":
        kept = (
            f"yours is kept at {_short(event.kept_as)}"
            if event.kept_as
            else "your deletion is dropped"
        )
        return (
            f"⚠ conflict in branch {event.label}: {event.path} was changed by the branch too; "
            f"the branch keeps its version, {kept}",
            "warning",
        )
    if kind == "BranchEditRefused":
        return (f"✗ not applied to branch {event.label}: {event.reason}", "warning")
    return None


__all__ = ["EDIT_EVENTS", "edit_notice"]
