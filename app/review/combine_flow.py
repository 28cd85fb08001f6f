"""The chat's side of the combined merge: a live combiner for the open fork whose merge
goes through the session (so the chat's history, totals and fork view follow it).

Why here and not in the chat screen: the chat only needs two small hooks (pass
``live_combiner(session)`` to the explorer/picker, and show a ``MergeResult`` that comes
back); what a combined merge is, and how it is told, lives with the rest of issue 17's TUI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .combine_state import Choice, LiveCombiner

if TYPE_CHECKING:
    from ..session import ChatSession


def live_combiner(session: ChatSession) -> LiveCombiner | None:
    """A combiner for the session's open fork (``None`` when no fork is open)."""
    coordinator = session.coordinator
    if coordinator is None or coordinator.fork_id is None:
        return None

    async def merge(selection: dict[str, Choice], base: str | None) -> Any:
        from branching_core import MergeAction

        return await session.merge(MergeAction.combine(selection, base=base))

    return LiveCombiner(coordinator, merge)


def process_source(session: ChatSession) -> Any:
    """``coord.process_report`` of the open fork, for the explorer's ``p`` (or ``None``)."""
    coordinator = session.coordinator
    return coordinator.process_report if coordinator is not None else None


def is_merge_result(value: Any) -> bool:
    """A screen dismissed with a finished merge (the explorer's ``m``) rather than an action.

    By type: a judge's ``ResolveOutcome`` also has a ``winner_label`` and is no merge."""
    from branching_core.fork import MergeResult  # plain dataclasses: cheap

    return isinstance(value, MergeResult)


__all__ = ["is_merge_result", "live_combiner", "process_source"]
