"""What the user did with the judge's pick, appended to ``.pydantic-deep/judge-log.jsonl``.

Why: ``forkdeck status`` shows how often the user agreed with the judge (and
``auto_tune_threshold`` tunes ``confidence_threshold`` from it); that figure only exists if
the TUI writes down every accept, override and cancel of a verdict the user saw. A merge
that failed (a conflict: the fork stays open) is no decision yet, so nothing is written
then; a log that cannot be written never undoes or blocks a merge (a warning instead).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core import ConfigError, MergeAction
from branching_core.review import record_judge_decision

from .combine_flow import is_merge_result

if TYPE_CHECKING:
    from ..session import ChatSession


def user_decision(outcome: Any, choice: Any, *, fork_open: bool) -> tuple[str, str | None] | None:
    """``(user_action, chosen)`` for what the user did after seeing ``outcome``.

    ``choice``: ``None`` (cancelled), a ``MergeAction`` pick (merged that branch, unless
    ``fork_open`` says the merge failed; its string form is parsed) or a combined merge's
    ``MergeResult``. ``None`` when
    there is nothing to record (no verdict was shown, or the merge did not happen).
    """
    if outcome is None or getattr(outcome, "winner_label", None) is None:
        return None
    if getattr(outcome, "committed", False):
        return None  # the engine merged it itself and logged it (auto)
    if choice is None:
        return "cancelled", None
    if fork_open:
        return None  # the merge failed: the user has not decided yet
    if is_merge_result(choice):
        return "overrode", f"combine (history from {choice.winner_label})"
    action = choice
    if isinstance(action, str):  # the string form, parsed by the engine's one parser
        try:
            action = MergeAction.parse(action)
        except ValueError:
            return None
    if isinstance(action, MergeAction) and action.kind == "pick" and action.label:
        label = action.label
        return ("accepted" if label == outcome.winner_label else "overrode"), label
    return None


async def judge_decided(session: ChatSession, outcome: Any, choice: Any) -> str | None:
    """Record the decision (see :func:`user_decision`); returns a warning line when the
    log could not be written, else ``None``."""
    decision = user_decision(outcome, choice, fork_open=session.fork_active)
    if decision is None:
        return None
    action, chosen = decision
    root = session.workspace.path if session.workspace is not None else session.root
    try:
        await asyncio.to_thread(
            record_judge_decision, Path(root), outcome, user_action=action, chosen=chosen
        )
    except (OSError, ConfigError, ValueError) as exc:
        return f"the judge log was not written: {exc}"
    return None


__all__ = ["judge_decided", "user_decision"]
