"""``resolve``: settle a fork per its ``MergeStrategy`` (manual, auto, auto_with_fallback, vote).

Order of work for the judged modes: wait for the branches to stop, build the diff report,
run ``test_command`` in every branch at once (sandboxed, see ``branch_tests``), ask the
judge(s), then combine the evidence with ``compute_confidence``.

* ``manual``: returns at once; the caller picks with ``merge_or_select``.
* ``auto``: the judge's pick is merged immediately (``committed=True``).
* ``auto_with_fallback``: at or above ``confidence_threshold`` the outcome is
  ``auto_eligible=True`` and the merge is left to the caller (so a UI can offer an
  override; ``commit=True`` merges right away for headless callers); below it, or when the
  judge named no branch, ``auto_eligible=False`` and the picker opens preselected.
* ``vote``: several judges concurrently (passed in, else one cheap model per provider
  whose key is set, cycled to three); majority wins, a tie goes to the candidate with the
  highest individual confidence; merged immediately.

A judge that cannot name a branch (after being asked again once) never merges anything:
the outcome falls back to manual with ``fallback_reason`` set.

The judge's instructions follow the task (``judge_domain``: code vs research/writing). A
merge ``resolve`` makes itself is appended to the judge log (``judge_log``: ``auto`` for
``auto``/``vote``, ``accepted`` for ``auto_with_fallback`` with ``commit=True``); a UI
records what the user did with :func:`record_judge_decision`. With ``[review]
auto_tune_threshold = true`` the threshold comes from that log (``tune_confidence_threshold``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai.models import Model

from branching_core.errors import ConfigError, InvalidArgumentError, InvalidStateError
from branching_core.merge_action import MergeAction
from branching_core.review.branch_tests import DEFAULT_TEST_TIMEOUT_S, run_branch_tests
from branching_core.review.confidence import (
    compute_confidence,
    count_model_responses,
    count_retry_parts,
    count_tool_failures,
    signals_for,
)
from branching_core.review.detect_tests import choose_test_command
from branching_core.review.diff_report import build_diff_report, user_edit_marks
from branching_core.review.domain import judge_domain
from branching_core.review.judge import JudgeAgent, JudgeDecision
from branching_core.review.judge_log import record_judge_decision, tune_confidence_threshold
from branching_core.review.process_report import build_process_report
from branching_core.review.types import (
    BranchDiffReport,
    BranchOutcome,
    BranchTestResult,
    JudgeVerdict,
    ResolveOutcome,
)

log = logging.getLogger(__name__)

VOTE_PANEL_SIZE = 3
ModelChoice = str | Model | JudgeAgent


def vote_panel(
    fallback: str | Model | None = None,
    *,
    env: Mapping[str, str] | None = None,
    size: int = VOTE_PANEL_SIZE,
) -> list[str | Model]:
    """Judges for ``vote``: one cheap model per provider with a key (SDK installed),
    de-duplicated and cycled to ``size``; ``fallback`` (or the default model) otherwise."""
    from branching_core.agent import default_model, detect_providers

    models: list[str | Model] = []
    for info in detect_providers(env):
        if info.installed and info.default_model not in models:
            models.append(info.default_model)
    if not models:
        models = [fallback if fallback is not None else default_model(env)]
    return list(itertools.islice(itertools.cycle(models), size))


def branch_outcome(rt: Any, tests: BranchTestResult | None = None) -> BranchOutcome:
    """What the judge may know about one branch run (no message history)."""
    meter = getattr(rt, "meter", None)
    history = list(getattr(rt, "history", []) or [])
    state = str(getattr(rt, "state", "done"))
    error = getattr(rt, "error", None)
    cost = None
    if meter is not None and getattr(meter, "cost_known", True):
        cost = float(meter.cost_usd)
    requests = int(getattr(meter, "requests", 0) or 0) or count_model_responses(history)
    return BranchOutcome(
        branch_id=rt.branch_id,
        label=rt.label,
        state=state,
        final_message=getattr(rt, "output", None),
        cost_usd=cost,
        turns=int(getattr(rt, "turns", 1) or 1),
        requests=requests,
        tool_calls=int(getattr(rt, "tool_calls", 0) or 0),
        error_count=(1 if (state == "failed" or error) else 0) + count_tool_failures(history),
        retry_count=count_retry_parts(history),
        error=error,
        tests=tests,
    )


def majority(decisions: Sequence[JudgeDecision]) -> JudgeDecision | None:
    """The winning decision of a vote: most votes; a tie goes to the highest confidence."""
    valid = [d for d in decisions if d.winner_id is not None and d.verdict is not None]
    if not valid:
        return None
    votes = Counter(d.winner_id for d in valid)
    top = max(votes.values())
    tied = {w for w, n in votes.items() if n == top}
    best = max(
        (d for d in valid if d.winner_id in tied),
        key=lambda d: d.verdict.confidence if d.verdict else 0.0,
    )
    return best


def _judge(choice: ModelChoice | None) -> JudgeAgent:
    return choice if isinstance(choice, JudgeAgent) else JudgeAgent(choice)


def _pick_action(coordinator: Any, branch_id: str) -> MergeAction:
    """Pick that branch by label (by id only when two branches share a label)."""
    rt = coordinator.branches[branch_id]
    same = [r for r in coordinator.branches.values() if r.label == rt.label]
    return MergeAction.pick(rt.label if len(same) == 1 else branch_id)


async def resolve(
    coordinator: Any,
    strategy: Any = None,
    *,
    goal: str | None = None,
    judges: Sequence[ModelChoice] | None = None,
    test_command: str | None = None,
    test_timeout_s: float | None = None,
    test_limits: Any = None,
    settings: Any = None,
    commit: bool = False,
    wait_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> ResolveOutcome:
    """Resolve ``coordinator``'s fork per ``strategy`` (default: the fork's own).

    ``goal`` is what the branches were asked to achieve (default: their steers);
    ``judges`` overrides the judge model(s) (names, ``Model`` objects or ``JudgeAgent``s;
    the first one for ``auto``/``auto_with_fallback``); ``test_command`` runs in every
    branch before judging (default: the coordinator's ``test_command`` attribute if it has
    one, else ``settings.test_command`` from ``[review]``, else the command
    ``detect_test_command`` finds in the parent workspace; ``""`` runs no tests; what ran
    is ``outcome.test_command``); ``commit=True`` makes an
    eligible ``auto_with_fallback`` merge at once. Raises ``RuntimeError`` when there is
    no fork or it is already resolved, ``ValueError`` for an unknown strategy kind.
    """
    handle = coordinator.handle
    if handle is None:
        raise InvalidStateError("no fork yet: call fork() (or the fork_run tool) first")
    if coordinator.is_resolved:
        raise InvalidStateError(f"fork {handle.fork_id} is already resolved")
    strategy = strategy if strategy is not None else handle.merge_strategy
    kind = strategy.kind
    if kind not in ("manual", "auto", "auto_with_fallback", "vote"):
        raise InvalidArgumentError(
            f"unknown merge strategy {kind!r}: use manual, auto, auto_with_fallback or vote"
        )
    threshold = float(strategy.confidence_threshold)
    root = coordinator.workspace.path
    if getattr(settings, "auto_tune_threshold", False):
        threshold = tune_confidence_threshold(root, threshold)
    outcome = ResolveOutcome(kind=kind, threshold=threshold)
    if kind == "manual":
        return outcome

    # Build the judges first: a bad model name fails here, before any work is done.
    if kind == "vote":
        panel = list(judges) if judges else vote_panel(strategy.judge_model, env=env)
        agents = [_judge(m) for m in panel]
    else:
        agents = [_judge(judges[0] if judges else strategy.judge_model)]

    if test_command is None:
        test_command = getattr(coordinator, "test_command", None) or getattr(
            settings, "test_command", None
        )
    chosen_tests = (
        choose_test_command(test_command, coordinator.parent_path)
        if test_command is None or test_command.strip()
        else None  # test_command="" turns the tests off
    )
    if test_timeout_s is None:
        test_timeout_s = float(
            getattr(coordinator, "test_timeout_s", None)
            or getattr(settings, "test_timeout_s", None)
            or DEFAULT_TEST_TIMEOUT_S
        )

    await coordinator.wait(timeout=wait_timeout)
    runtimes = [rt for rt in coordinator.branches.values() if rt.ws_branch is not None]
    if not runtimes:
        outcome.fallback_reason = "no branch has files left to merge"
        return outcome
    report = await asyncio.to_thread(
        build_diff_report,
        handle.fork_id,
        runtimes,
        parent_path=coordinator.parent_path,
        user_edits=user_edit_marks(coordinator),
    )
    outcome.report = report
    outcome.test_command = chosen_tests
    if chosen_tests is not None:
        outcome.test_results = await run_branch_tests(
            runtimes, chosen_tests.command, timeout=test_timeout_s, limits=test_limits
        )
    outcomes = [branch_outcome(rt, outcome.test_results.get(rt.branch_id)) for rt in runtimes]
    if goal is None:
        goal = "\n".join(f"- {rt.label}: {rt.spec.steer}" for rt in runtimes)
        goal = f"The branches were asked (one approach each):\n{goal}"

    outcome.goal = goal
    outcome.domain = judge_domain(goal, report)
    outcome.process = build_process_report(
        runtimes, price_fn=getattr(coordinator, "price_fn", None)
    )
    process_text = outcome.process.summary()
    decisions = await asyncio.gather(
        *(
            a.decide(goal, report, outcomes, domain=outcome.domain, process_summary=process_text)
            for a in agents
        )
    )
    for d in decisions:
        outcome.judge_usage.extend(d.usage)
        if d.verdict is not None:
            outcome.verdicts.append(d.verdict)
    chosen = majority(decisions) if kind == "vote" else decisions[0]
    if chosen is None or chosen.winner_id is None or chosen.verdict is None:
        errors = "; ".join(d.error or "no verdict" for d in decisions)
        outcome.fallback_reason = f"the judge could not pick a branch ({errors})"
        return outcome

    winner = coordinator.branches[chosen.winner_id]
    outcome.winner_branch_id = winner.branch_id
    outcome.winner_label = winner.label
    verdict = _vote_verdict(chosen, decisions) if kind == "vote" else chosen.verdict
    outcome.verdict = verdict
    _score(outcome, report, outcomes, verdict)

    if kind == "auto_with_fallback":
        outcome.auto_eligible = (outcome.confidence or 0.0) >= threshold
        if not (commit and outcome.auto_eligible):
            return outcome
    outcome.merge_result = await coordinator.merge_or_select(
        _pick_action(coordinator, winner.branch_id)
    )
    outcome.committed = True
    # auto_with_fallback with commit=True: the caller accepted the pick in advance
    _log(root, outcome, "accepted" if kind == "auto_with_fallback" else "auto")
    return outcome


def _log(root: Any, outcome: ResolveOutcome, action: str) -> None:
    """Append to the judge log; a log that cannot be written never undoes a merge."""
    try:
        record_judge_decision(root, outcome, user_action=action)
    except (OSError, ConfigError) as exc:
        log.warning("judge log not written: %s", exc)


def _vote_verdict(chosen: JudgeDecision, decisions: Sequence[JudgeDecision]) -> JudgeVerdict:
    """The synthetic majority verdict: the voters' mean confidence times their share."""
    voters = [d for d in decisions if d.winner_id == chosen.winner_id and d.verdict is not None]
    mean_conf = sum(d.verdict.confidence for d in voters if d.verdict) / len(voters)
    share = len(voters) / max(len(decisions), 1)
    assert chosen.verdict is not None
    return JudgeVerdict(
        winner=chosen.winner_label or chosen.verdict.winner,
        confidence=round(mean_conf * share, 6),
        rationale=f"{len(voters)} of {len(decisions)} judges: {chosen.verdict.rationale}",
        runner_up=chosen.verdict.runner_up,
        concerns=[c for d in voters if d.verdict for c in d.verdict.concerns],
    )


def _score(
    outcome: ResolveOutcome,
    report: BranchDiffReport,
    outcomes: Sequence[BranchOutcome],
    verdict: JudgeVerdict,
) -> None:
    me = next(o for o in outcomes if o.branch_id == outcome.winner_branch_id)
    ratio = me.tests.pass_ratio if me.tests is not None else None
    signals = signals_for(
        report,
        me.branch_id,
        test_pass_ratio=ratio,
        errors=me.error_count,
        retries=me.retry_count,
        requests=me.requests,
        state=me.state,
    )
    outcome.signals = signals
    outcome.confidence = compute_confidence(signals, verdict.confidence)


__all__ = ["branch_outcome", "majority", "resolve", "vote_panel"]
