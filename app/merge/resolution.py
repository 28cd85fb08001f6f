"""The session's side of resolving a fork: whether the judge can run, running it, refusing
a winner that collides with the parent, merging, and the winner's conversation becoming
the chat's.

Why apart from ``app.session``: these change with the merge rules, not with start-up or the
parent chat; ``ChatSession`` keeps one-line methods for them (its public API, what the
merge workflow and scripts call) and this module does the work on the live coordinator.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .outcome import MergeConflict, test_line

if TYPE_CHECKING:
    from branching_core import MergeAction
    from branching_core.fork import ForkCoordinator, MergeResult

    from .session_port import MergingSession


def judge_unavailable(session: MergingSession) -> str | None:
    """Why the judge cannot run (no LLM for it), or None when it can.

    The offline model cannot give a structured verdict; asking it anyway ends in a raw
    ``UnexpectedModelBehavior``. Say what is missing instead (issue 13.24).
    """
    if session.judges:
        return None
    from branching_core import ConfigError
    from branching_core.agent import is_offline, resolve_model

    from ..model_env import MODEL_ENV_KEYS

    coordinator = session.coordinator
    handle = coordinator.handle if coordinator is not None else None
    name = handle.merge_strategy.judge_model if handle is not None else None
    try:
        model = resolve_model(name, env=session.env)
    except ConfigError as exc:
        return f"the judge has no usable model ({exc}): pick the winner yourself"
    if is_offline(model):
        return (
            "the judge needs a model and no LLM is configured (set one of "
            f'{", ".join(MODEL_ENV_KEYS[:3])}, ..., or merge_strategy = "manual" '
            "under [review]): pick the winner yourself"
        )
    return None


async def run_judge(session: MergingSession) -> Any:
    """``branching_core.review.resolve`` on the open fork; keeps its test results for the
    merge picker. Raises ``RuntimeError`` with a readable reason."""
    from branching_core.review import resolve

    reason = judge_unavailable(session)
    if reason is not None:
        raise RuntimeError(reason)
    coordinator = session.coordinator
    if coordinator is None:
        raise RuntimeError("no fork is open")
    with session.busy("asking the judge"):
        outcome = await resolve(coordinator, judges=session.judges, settings=session.settings)
    session.branch_tests = {r.label: test_line(r) for r in (outcome.test_results or {}).values()}
    return outcome


async def merge(session: MergingSession, action: MergeAction | str, **options: Any) -> MergeResult:
    """Resolve the fork; a picked winner's history becomes the chat's history.

    ``action`` is a ``MergeAction`` (its string form is parsed by ``MergeAction.coerce``,
    the engine's one parser). A pick is made with ``on_conflict="refuse"``: a winner whose
    changes collide with the parent (a path changed here since the fork, the engine's one
    conflict rule) is refused by the engine before anything happens
    (:class:`MergeConflict`): the fork stays open, the chat and every file stay as they
    are, and the user can pick another branch, abort, or undo the parent's change. Should
    the parent change between that check and the commit, the engine leaves the colliding
    paths alone; the chat then keeps its own history too (the branch's conversation would
    describe files that did not land).
    """
    from branching_core import ConflictError, MergeAction

    coordinator = session.coordinator
    if coordinator is None:
        raise RuntimeError("no fork to merge")
    action = MergeAction.coerce(action)
    label = (action.label or "") if action.kind == "pick" else ""
    if label:
        action = replace(action, on_conflict="refuse")
        await _wait_for_winner(session, coordinator, label)
    spent = session.fork_totals()
    try:
        with session.busy(f"merging branch {label}" if label else "closing the fork"):
            result = await coordinator.merge_or_select(action, **options)  # combine: selection
    except ConflictError as exc:
        if not label or exc.stale:
            raise
        raise MergeConflict(_label_of(coordinator, label), exc.paths) from exc
    session.settle_fork(spent)
    _adopt_history(session, result)
    return result


def adopt_merge(session: MergingSession, result: MergeResult) -> MergeResult:
    """Take over a merge someone else ran on our coordinator (the judge's ``auto``)."""
    session.settle_fork(session.fork_totals())
    _adopt_history(session, result)
    return result


def _adopt_history(session: MergingSession, result: MergeResult) -> None:
    """The winner's conversation becomes the chat's; ``merged_messages`` is what it adds
    to what the chat already shows (the whole of it for a fork of an earlier session)."""
    session.merged_messages = []
    if result.aborted or result.conflicts:
        return
    before, after = session.history, list(result.history_after_merge)
    same_start = len(after) >= len(before) and after[: len(before)] == before
    session.merged_messages = after[len(before) :] if same_start else after
    session.history = after


async def _wait_for_winner(
    session: MergingSession, coordinator: ForkCoordinator, label: str
) -> None:
    """A running winner is awaited first, with its own busy line (the engine would await
    it inside the merge); "s" in the merge picker stops it instead."""
    try:
        rt = coordinator.get_branch(label)
    except (KeyError, ValueError):
        return  # merge_or_select says what is wrong with the label
    if rt.task is not None and not rt.task.done():
        with session.busy(f"waiting for branch {rt.label} to finish"):
            await asyncio.wait([rt.task])


def _label_of(coordinator: ForkCoordinator, label: str) -> str:
    """The branch's label (``label`` may be its id)."""
    try:
        return coordinator.get_branch(label).label
    except (KeyError, ValueError):
        return label
