"""The session's side of resolving a fork: whether the judge can run, running it, refusing
a winner that collides with the parent, merging, and the winner's conversation becoming
the chat's.

Why apart from ``app.session``: these change with the merge rules, not with start-up or the
parent chat; ``ChatSession`` keeps one-line methods for them (its public API, what the
merge workflow and scripts call) and this module does the work on the live coordinator.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .outcome import MergeConflict, test_line

if TYPE_CHECKING:
    from branching_core.fork import ForkCoordinator, MergeResult

    from .session_port import MergingSession


def judge_unavailable(session: MergingSession) -> str | None:
    """Why the judge cannot run (no LLM for it), or None when it can.

    The offline model cannot give a structured verdict; asking it anyway ends in a raw
    ``UnexpectedModelBehavior``. Say what is missing instead (issue 13.24).
    """
    if session.judges:
        return None
    from branching_core.agent import is_offline, resolve_model
    from branching_core.errors import ConfigError

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


async def merge(session: MergingSession, action: str, **options: Any) -> MergeResult:
    """Resolve the fork; a picked winner's history becomes the chat's history.

    A winner whose changes collide with the parent (a path changed here since the fork)
    is refused before anything happens (:class:`MergeConflict`): the fork stays open,
    the chat and every file stay as they are, and the user can pick another branch,
    abort, or undo the parent's change. Should the parent change between that check and
    the commit, the engine leaves the colliding paths alone; the chat then keeps its own
    history too (the branch's conversation would describe files that did not land).
    """
    coordinator = session.coordinator
    if coordinator is None:
        raise RuntimeError("no fork to merge")
    label = action[5:].strip() if action.startswith("pick:") else ""
    if label:
        await _refuse_conflicts(session, coordinator, label)
    spent = session.fork_totals()
    with session.busy(f"merging branch {label}" if label else "closing the fork"):
        result = await coordinator.merge_or_select(action, **options)  # combine: selection/base
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


async def _refuse_conflicts(
    session: MergingSession, coordinator: ForkCoordinator, label: str
) -> None:
    from branching_core.workspace.apply import changed_since

    try:
        rt = coordinator.get_branch(label)
    except (KeyError, ValueError):
        return  # merge_or_select says what is wrong with the label
    if rt.task is not None and not rt.task.done():
        # The winner is awaited anyway (check what it leaves); "s" in the merge picker
        # stops it instead.
        with session.busy(f"waiting for branch {rt.label} to finish"):
            await asyncio.wait([rt.task])
    branch = rt.ws_branch
    if branch is None:
        return
    conflicts = await asyncio.to_thread(
        changed_since, branch.changes(), coordinator.parent_path, branch.created_ns
    )
    if conflicts:
        raise MergeConflict(rt.label, conflicts)
