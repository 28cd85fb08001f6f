"""How sure we are that the judge's pick should be merged without asking: ``compute_confidence``.

The formula (a sum of log-odds; sigmoid is the logistic function)::

    confidence = sigmoid(z), where z is the sum of

      0.6 * logit(clamp(J, 0.02, 0.95)) - 0.5     the judge's own confidence J, discounted
      4.5 * T - 3.0        (only if tests ran)    the winner's test pass ratio T
      1.5 * C - 0.5        (only if C is known)   convergence C of the others on the winner
      3.0 * (H - 1)                               the winner's health H
      -2.0 if the winner failed, -0.5 if it was stopped early (budget, terminated)

Why this shape:

* Log-odds make independent signals *add up*: strong tests and branches converging on the
  winner's result each move the judge's odds, and several strong signals can clear the
  0.80 auto-merge threshold. The seed's product-with-a-cap could never reach 0.80 without
  tests (it capped at 0.65), so ``auto_with_fallback`` never auto-merged.
* The judge's self-reported confidence is shrunk (temperature 1/0.6, clamped to 0.95, minus
  0.5): a model alone saying "0.95" gives 0.78, just under the threshold. A pick is only
  merged unasked when at least one independent signal corroborates it.
* Tests weigh most: all passing adds +1.5, none passing (or zero collected) takes -3.0, so
  failing tests sink any pick. ``T`` is ``None`` when no test command ran (no evidence).
* Convergence ``C`` is the share of *other* branches that, on paths the winner changed,
  ended with exactly the winner's result (averaged over those paths). Independent branches
  arriving at the same change is evidence; it adds at most +1.0. Branches that did
  something else take at most 0.5 off (the winner may be the one that got it right).
  Spread between branches is never rewarded (the seed's ``quality_spread`` did that).
* Health ``H = 1 - (errors + retries) / max(requests, 1)`` only subtracts: a winner that
  failed, retried or crashed is a worse bet however good its diff looks.

Reference points (threshold 0.80): judge 0.9 alone → 0.69; plus convergence 1.0 → 0.86;
plus tests all passing → 0.97; tests all passing without convergence → 0.91; judge 0.9,
convergence 1.0, every test failing → 0.24.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from branching_core.review.types import BranchDiffReport, ConfidenceSignals
from branching_core.run_states import FORK_STOPPED_STATES

JUDGE_WEIGHT = 0.6
JUDGE_MAX = 0.95
JUDGE_MIN = 0.02
JUDGE_PRIOR = -0.5
TESTS_SLOPE, TESTS_OFFSET = 4.5, -3.0
CONVERGENCE_SLOPE, CONVERGENCE_OFFSET = 1.5, -0.5
HEALTH_WEIGHT = 3.0
FAILED_PENALTY = -2.0
STOPPED_PENALTY = -0.5
STOPPED_STATES = FORK_STOPPED_STATES


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return min(max(x, lo), hi)


def confidence_terms(signals: ConfidenceSignals, judge_confidence: float) -> dict[str, float]:
    """Each signal's log-odds contribution (what ``compute_confidence`` sums), for display."""
    j = _clamp(float(judge_confidence), JUDGE_MIN, JUDGE_MAX)
    terms = {"judge": JUDGE_WEIGHT * _logit(j) + JUDGE_PRIOR}
    if signals.test_pass_ratio is not None:
        terms["tests"] = TESTS_SLOPE * _clamp(signals.test_pass_ratio) + TESTS_OFFSET
    if signals.convergence is not None:
        terms["convergence"] = CONVERGENCE_SLOPE * _clamp(signals.convergence) + CONVERGENCE_OFFSET
    terms["health"] = HEALTH_WEIGHT * (_clamp(signals.health) - 1.0)
    if signals.winner_state == "failed":
        terms["state"] = FAILED_PENALTY
    elif signals.winner_state in STOPPED_STATES:
        terms["state"] = STOPPED_PENALTY
    return terms


def compute_confidence(signals: ConfidenceSignals, judge_confidence: float) -> float:
    """Combine the evidence with the judge's own confidence (formula in the module docstring).

    Returns a value in ``[0, 1]``; ``judge_confidence`` outside ``[0, 1]`` is clamped.
    """
    return _clamp(_sigmoid(sum(confidence_terms(signals, judge_confidence).values())))


def _parts(messages: Iterable[Any]) -> Iterable[Any]:
    for message in messages:
        yield from getattr(message, "parts", ())


def count_retry_parts(messages: Iterable[Any]) -> int:
    """Every retry in ``messages``: a tool call answered with ``outcome="retried"``, a
    ``RetryFeedbackPart`` (unusable output, ``ModelRetry``) or a legacy ``RetryPromptPart``."""
    count = 0
    for part in _parts(messages):
        kind = getattr(part, "part_kind", None)
        if kind in ("retry-prompt", "retry-feedback") or (
            kind == "tool-return" and getattr(part, "outcome", None) == "retried"
        ):
            count += 1
    return count


def count_tool_failures(messages: Iterable[Any]) -> int:
    """Tool calls that failed (the tool raised): ``ToolReturnPart(outcome="failed")``."""
    return sum(
        1
        for part in _parts(messages)
        if getattr(part, "part_kind", None) == "tool-return"
        and getattr(part, "outcome", None) == "failed"
    )


def count_model_responses(messages: Iterable[Any]) -> int:
    return sum(1 for m in messages if getattr(m, "kind", None) == "response")


def health(*, errors: int, retries: int, requests: int) -> float:
    """``1 - (errors + retries) / max(requests, 1)``, clamped to ``[0, 1]``."""
    return _clamp(1.0 - (errors + retries) / max(requests, 1))


def convergence(report: BranchDiffReport, winner_id: str) -> float | None:
    """Share of other branches matching the winner's end state on the paths it changed.

    For every path the winner changed that at least one other branch also touched: the
    fraction of those other branches whose result (bytes, or absence) equals the winner's.
    Averaged over such paths; ``None`` when no other branch touched the winner's paths.
    """
    shares: list[float] = []
    for entry in report.paths:
        mine = entry.branches.get(winner_id)
        if mine is None or not mine.touched:
            continue
        mine_state = _end_state(entry.path, mine)
        others = [
            _end_state(entry.path, c)
            for bid, c in entry.branches.items()
            if bid != winner_id and c.touched
        ]
        if others:
            shares.append(sum(1 for o in others if o == mine_state) / len(others))
    return sum(shares) / len(shares) if shares else None


def _end_state(path: str, change: Any) -> str | None:
    """The branch's end state *at* ``path`` (``None`` = absent)."""
    if change.operation == "deleted" or (change.operation == "renamed" and change.path != path):
        return None
    return change.sha256


def signals_for(
    report: BranchDiffReport | None,
    winner_id: str,
    *,
    test_pass_ratio: float | None,
    errors: int,
    retries: int,
    requests: int,
    state: str,
) -> ConfidenceSignals:
    """Gather the winner's ``ConfidenceSignals`` from the report and its run."""
    return ConfidenceSignals(
        test_pass_ratio=test_pass_ratio,
        health=health(errors=errors, retries=retries, requests=requests),
        convergence=convergence(report, winner_id) if report is not None else None,
        agreement=report.summary.agreement_score if report is not None else 1.0,
        winner_state=state,
    )


__all__ = [
    "compute_confidence",
    "confidence_terms",
    "convergence",
    "count_model_responses",
    "count_retry_parts",
    "count_tool_failures",
    "health",
    "signals_for",
]
