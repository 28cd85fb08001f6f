"""Choosing the branch that lands: ``tests``, ``judge``, ``manual`` (``first`` is decided
while the agents run, in ``race``).

* ``tests``: among the agents that exited 0, changed something and (with a test command)
  passed it, the one with the smallest diff (changed lines, then changed paths, then
  who finished first). The smallest passing change is the least to review and the
  least likely to carry unrelated edits.
* ``judge``: the review layer's judge reads the diff report and each branch's outcome.
* ``manual``: ``chooser`` gets one row per branch and returns a label (or None).
"""

from __future__ import annotations

import asyncio
import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from branching_core.errors import InvalidArgumentError, error_name
from branching_core.external.runner import AgentRun, strip_ansi

PICKS = ("tests", "judge", "manual", "first")
_MAX_DIFF_BYTES = 2_000_000


@dataclass(frozen=True)
class Candidate:
    """One row of the manual choice (and what ``tests`` ranks)."""

    label: str
    agent: str
    status: str
    exit_code: int | None
    tests: str  # "passed", "failed", "-" (not run)
    changed: list[str]
    diff_lines: int
    duration_s: float
    cost_usd: float | None


Chooser = Callable[[list[Candidate]], str | None]


def _read(path: str) -> list[str] | None:
    try:
        if os.path.getsize(path) > _MAX_DIFF_BYTES:
            return None
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []


def diff_lines(run: AgentRun, parent: str, paths: list[str]) -> int:
    """Lines added plus removed across ``paths`` (a big or binary file counts 1000)."""
    total = 0
    for rel in paths:
        new = _read(os.path.join(os.fspath(run.ws_branch.path), rel))
        old = _read(os.path.join(parent, rel))
        if new is None or old is None:
            total += 1000
            continue
        total += sum(1 for line in difflib.ndiff(old, new) if line[:1] in "+-")
    return total


def candidates(runs: Mapping[str, AgentRun], tests: Mapping[str, Any],
               changed: Mapping[str, list[str]], parent: str) -> list[Candidate]:
    rows = []
    for label, run in runs.items():
        result = tests.get(label)
        verdict = "-" if result is None else ("passed" if result.ok else "failed")
        paths = changed.get(label, [])
        rows.append(Candidate(label, run.profile.name, run.status.state, run.status.exit_code,
                              verdict, paths, diff_lines(run, parent, paths), run.duration,
                              run.cost_usd))
    return rows


def _by_tests(rows: list[Candidate], runs: Mapping[str, AgentRun], tested: bool
              ) -> tuple[str | None, str]:
    ok = [r for r in rows if r.exit_code == 0 and r.status == "exited" and r.changed
          and (not tested or r.tests == "passed")]
    if not ok:
        why = "no agent exited 0 with a change" + (" that passes the tests" if tested else "")
        return None, why
    best = min(ok, key=lambda r: (r.diff_lines, len(r.changed),
                                  runs[r.label].ended or float("inf")))
    return best.label, f"{best.label}: smallest passing diff ({best.diff_lines} lines)"


def _by_judge(rows: list[Candidate], runs: Mapping[str, AgentRun], tests: Mapping[str, Any],
              prompt: str, model: Any) -> tuple[str | None, str]:
    from branching_core.review.diff_report import build_diff_report
    from branching_core.review.judge import JudgeAgent
    from branching_core.review.types import BranchOutcome

    finished = [r for r in rows if r.exit_code == 0 and r.status == "exited" and r.changed]
    if not finished:
        return None, "no agent exited 0 with a change"
    outcomes = [BranchOutcome(runs[r.label].branch_id, r.label, "completed",
                              final_message="\n".join(strip_ansi(x)
                                                      for x in runs[r.label].tail(30)),
                              cost_usd=r.cost_usd, tests=tests.get(r.label))
                for r in finished]
    report = build_diff_report("agents", [runs[r.label] for r in finished])

    try:
        judge = JudgeAgent(model)
    except Exception as exc:  # no model configured, unknown provider...: nothing lands
        return None, f"judge unavailable: {error_name(exc)}: {exc}"

    async def decide() -> Any:
        return await judge.decide(prompt, report, outcomes)

    decision = asyncio.run(decide())
    if decision.winner_label is None:
        return None, decision.error or "the judge named no branch"
    reason = decision.verdict.rationale if decision.verdict is not None else ""
    return decision.winner_label, f"judge ({decision.model_name}): {reason}".strip()


def pick_winner(pick: str, runs: Mapping[str, AgentRun], tests: Mapping[str, Any],
                changed: Mapping[str, list[str]], *, parent: str,
                chooser: Chooser | None = None, prompt: str = "",
                judge_model: Any = None) -> tuple[str | None, str]:
    """``(label or None, one line saying why)`` for ``tests``, ``judge`` or ``manual``."""
    rows = candidates(runs, tests, changed, parent)
    if pick == "tests":
        return _by_tests(rows, runs, bool(tests) or any(r.tests != "-" for r in rows))
    if pick == "judge":
        return _by_judge(rows, runs, tests, prompt, judge_model)
    if pick == "manual":
        if chooser is None:
            return None, "manual pick without a way to ask: nothing landed"
        label = chooser(rows)
        if label is None:
            return None, "nothing chosen: nothing landed"
        if label not in runs:
            return None, f"no branch {label!r}: nothing landed"
        return label, f"{label}: chosen by you"
    raise InvalidArgumentError(f"unknown pick {pick!r}")


__all__ = ["PICKS", "Candidate", "Chooser", "candidates", "diff_lines", "pick_winner"]
