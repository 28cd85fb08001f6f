"""The one-level patterns: Speculate, BestOfN, Reflexion, Tournament, Cascaded.

Each is a callable class: configure it, call it with a ``Workspace`` (or an open
``Branch``), get a ``SpeculationOutcome``. All share the runner's semantics (see
``_runner``): ``timeout`` is each candidate's wall clock, enforced by killing;
``overall_timeout`` bounds the whole call; ``resource_limits`` imply
``isolate_processes``; nothing is left running or open when the call returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from branching_core.errors import InvalidArgumentError, error_name
from branching_core.patterns._runner import (
    Attempt,
    CandidateScheduler,
    Evaluate,
    Job,
    Progress,
    rank,
)
from branching_core.patterns.result import ABORTED, COMMITTED, SpeculationOutcome
from branching_core.patterns.runners import LocalRunner, Runner
from branching_core.sandbox.limits import ResourceLimits


class _Pattern:
    """Keyword options every pattern takes, and the outcome bookkeeping."""

    prefix = "pattern"
    needs_local_trees = False  # the pattern reads candidate trees in this process

    def __init__(
        self,
        *,
        timeout: float | None = None,
        overall_timeout: float | None = None,
        resource_limits: ResourceLimits | None = None,
        isolate_processes: bool = False,
        evaluate: Evaluate | None = None,
        max_parallel: int | None = None,
        progress: Progress | None = None,
        runner: Runner | None = None,
    ) -> None:
        self.timeout = timeout
        self.overall_timeout = overall_timeout
        self.resource_limits = resource_limits
        self.isolate_processes = isolate_processes or resource_limits is not None
        self.evaluate = evaluate
        self.max_parallel = max_parallel
        self.progress = progress
        self.runner = runner if runner is not None else LocalRunner()
        if self.needs_local_trees and getattr(self.runner, "remote", False):
            raise InvalidArgumentError(
                f"{type(self).__name__} reads candidate trees in this process "
                f"(judge, critique or expand), so it cannot use {self.runner!r}; "
                "use Speculate, BestOfN, Cascaded or Reflexion without critique"
            )

    def _runner(self) -> CandidateScheduler:
        return CandidateScheduler(
            prefix=self.prefix, timeout=self.timeout, overall_timeout=self.overall_timeout,
            resource_limits=self.resource_limits, isolate_processes=self.isolate_processes,
            evaluate=self.evaluate, max_parallel=self.max_parallel, progress=self.progress,
            runner=self.runner,
        )

    def __call__(self, workspace: Any) -> SpeculationOutcome:
        started = time.monotonic()
        runner = self._runner()
        try:
            with runner:
                winner = self._explore(runner, workspace)
        finally:
            runner.release()
        outcome = SpeculationOutcome(
            # BestOfN(commit=False) reports its best success as the winner, uncommitted.
            committed=winner is not None and winner.result.status == COMMITTED,
            winner=winner.result if winner is not None else None,
            all_results=runner.results(),
            duration=time.monotonic() - started,
        )
        return outcome

    def _explore(self, runner: CandidateScheduler, parent: Any) -> Attempt | None:
        raise NotImplementedError


def _candidates_or_task(
    candidates: Any, n: int | None, default_n: int
) -> list[Callable[[Path], Any]]:
    """Seed 000's ``(candidates, ...)`` or seed 001's ``(task, n=...)`` (task(path, i))."""
    if (callable(candidates) or hasattr(candidates, "bind_candidate")) and not isinstance(
        candidates, Sequence
    ):
        count = default_n if n is None else n
        if count < 1:
            raise InvalidArgumentError(f"n must be at least 1, got {count}")
        return [_bind(candidates, _call_indexed, i) for i in range(count)]
    fns = list(candidates)
    if n is not None and n != len(fns):
        raise InvalidArgumentError(f"n={n} but {len(fns)} candidates were given")
    if not fns:
        raise InvalidArgumentError("at least one candidate is needed")
    return fns


def _call_indexed(task: Callable[[Path, int], Any], index: int, path: Path) -> Any:
    return task(path, index)


def _bind(task: Any, wrapper: Callable[..., Any], *args: Any) -> Callable[[Path], Any]:
    """``task`` with its extra arguments bound; a command task binds them itself
    (``bind_candidate``), so they become its environment instead of Python arguments."""
    binder = getattr(task, "bind_candidate", None)
    if binder is not None:
        return binder(*args)
    return partial(wrapper, task, *args)


class Speculate(_Pattern):
    """Race candidates; the first success commits and the rest are killed (``lost_race``).

    ``first_wins=False`` lets every candidate finish and commits the lowest-index
    success (deterministic, for callers who prefer order over latency).
    """

    prefix = "speculate"

    def __init__(
        self,
        candidates: Sequence[Callable[[Path], Any]],
        *,
        first_wins: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.candidates = _candidates_or_task(candidates, None, 0)
        self.first_wins = first_wins

    def _explore(self, runner: CandidateScheduler, parent: Any) -> Attempt | None:
        jobs = [Job(fn=fn) for fn in self.candidates]
        attempts = runner.run(parent, jobs, first_wins=self.first_wins)
        if self.first_wins:
            return next((a for a in attempts if a.result.status == "committed"), None)
        ready = [a for a in attempts if a.result.status == "ready"]
        return runner.finalize(ready)


class BestOfN(_Pattern):
    """Run every candidate, commit the highest-scoring success.

    ``BestOfN(candidates, scores=[...])`` or ``BestOfN(task, n=5)`` with
    ``task(path, attempt)``. ``commit=False`` commits nothing and returns every
    result (rollouts): successes are ``aborted`` with ``success=True``, and the
    best of them is the outcome's ``winner`` with ``committed=False`` (RL users
    read the winner, as with BranchContext 0.3.0).
    """

    prefix = "best-of-n"

    def __init__(
        self,
        candidates: Any,
        n: int | None = None,
        *,
        scores: Sequence[float] | None = None,
        commit: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.candidates = _candidates_or_task(candidates, n, 3)
        if scores is not None and len(scores) != len(self.candidates):
            raise InvalidArgumentError(
                f"{len(scores)} scores for {len(self.candidates)} candidates"
            )
        self.scores = list(scores) if scores is not None else None
        self.commit = commit

    def _explore(self, runner: CandidateScheduler, parent: Any) -> Attempt | None:
        jobs = [
            Job(fn=fn, prior_score=self.scores[i] if self.scores is not None else None)
            for i, fn in enumerate(self.candidates)
        ]
        attempts = runner.run(parent, jobs, first_wins=False)
        if not self.commit:
            ranked = rank(attempts)
            for att in attempts:
                runner.discard(att, ABORTED)
            return ranked[0] if ranked else None
        return runner.finalize(rank(attempts))


class Reflexion(_Pattern):
    """Attempt, and on failure critique and retry with the critique as feedback.

    ``task(path, attempt, feedback)``; ``critique(path) -> str`` runs in this
    process on the failed attempt's branch before it is aborted. Without a
    critique the feedback is the failure itself (exception or ``timed out``).
    ``max_retries`` is the total number of attempts.
    """

    prefix = "reflexion"

    def __init__(
        self,
        task: Callable[[Path, int, str | None], Any],
        max_retries: int = 3,
        *,
        critique: Callable[[Path], str] | None = None,
        **options: Any,
    ) -> None:
        self.needs_local_trees = critique is not None
        super().__init__(**options)
        if max_retries < 1:
            raise InvalidArgumentError(f"max_retries must be at least 1, got {max_retries}")
        self.task = task
        self.max_retries = max_retries
        self.critique = critique
        self.feedback_log: list[str | None] = []

    def _explore(self, runner: CandidateScheduler, parent: Any) -> Attempt | None:
        feedback: str | None = None
        for attempt in range(self.max_retries):
            left = runner.remaining()
            if left is not None and left <= 0:
                break
            self.feedback_log.append(feedback)
            fn = _bind(self.task, _call_reflexion, attempt, feedback)
            (att,) = runner.run(parent, [Job(fn=fn)], first_wins=False, keep_failed=True)
            if att.result.status == "ready":
                winner = runner.finalize([att])
                if winner is not None:
                    return winner
                feedback = _failure_text(att) or f"attempt {attempt} {att.result.status}"
                continue
            feedback = _failure_text(att) or f"attempt {attempt} {att.result.status}"
            if self.critique is not None and att.branch is not None and att.branch.is_open:
                feedback = _safe_critique(self.critique, att)
            runner.discard(att)
        return None


def _call_reflexion(task: Callable[..., Any], attempt: int, feedback: str | None,
                    path: Path) -> Any:
    return task(path, attempt, feedback)


def _failure_text(att: Attempt) -> str:
    """The candidate's own error context, else its exception, else '' (dropped)."""
    res = att.result
    if res.error_context is not None:
        return res.error_context
    if res.exception is not None:
        return f"{error_name(res.exception)}: {res.exception}"
    return ""


def _safe_critique(critique: Callable[[Path], str], att: Attempt) -> str:
    """The critique must see the failed branch, so the runner keeps it open until here."""
    try:
        return str(critique(att.result.branch_path or att.branch.path))
    except Exception as exc:
        return f"critique failed: {error_name(exc)}: {exc}"


class Tournament(_Pattern):
    """Run candidates, then pairwise elimination by ``judge(path_a, path_b) -> 0 | 1``.

    ``Tournament(candidates, judge=...)`` or ``Tournament(task, n=8, judge=...)``
    with ``task(path, index)``. Only successful candidates enter the bracket (in
    index order, an odd one out gets a bye); each loser's branch is aborted as soon
    as it loses. A judge that raises or answers anything but 0/1 propagates after
    every branch was aborted.
    """

    prefix = "tournament"
    needs_local_trees = True

    def __init__(
        self,
        candidates: Any,
        n: int | None = None,
        *,
        judge: Callable[[Path, Path], int],
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.candidates = _candidates_or_task(candidates, n, 4)
        self.judge = judge
        self.rounds: list[list[tuple[int, int, int]]] = []

    def _explore(self, runner: CandidateScheduler, parent: Any) -> Attempt | None:
        attempts = runner.run(parent, [Job(fn=fn) for fn in self.candidates], first_wins=False)
        alive = [a for a in attempts if a.result.status == "ready"]
        while len(alive) > 1:
            survivors: list[Attempt] = []
            matches: list[tuple[int, int, int]] = []
            for i in range(0, len(alive) - 1, 2):
                a, b = alive[i], alive[i + 1]
                verdict = self.judge(a.branch.path, b.branch.path)
                if verdict not in (0, 1) or isinstance(verdict, bool):
                    raise InvalidArgumentError(f"judge must return 0 or 1, got {verdict!r}")
                won, lost = (a, b) if verdict == 0 else (b, a)
                matches.append((a.result.branch_index, b.result.branch_index,
                                won.result.branch_index))
                runner.discard(lost, ABORTED)
                survivors.append(won)
            if len(alive) % 2:
                survivors.append(alive[-1])
            self.rounds.append(matches)
            alive = survivors
        return runner.finalize(alive)


class Cascaded(_Pattern):
    """Waves of widening fan-out; each wave races and sees earlier waves' errors.

    ``task(path, feedback) -> (success, error_context)``: ``feedback`` is the list
    of non-empty error strings from every earlier failed candidate (a candidate
    that raised or timed out contributes its exception text). The first success in
    a wave commits and kills its siblings; later waves never start.
    """

    prefix = "cascade"

    def __init__(
        self,
        task: Callable[[Path, list[str]], Any],
        fan_out: Sequence[int] = (1, 2, 4),
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if not fan_out or any(int(k) < 1 for k in fan_out):
            raise InvalidArgumentError(f"fan_out must be positive integers, got {fan_out!r}")
        self.task = task
        self.fan_out = [int(k) for k in fan_out]
        self.waves: list[list[int]] = []

    def _explore(self, runner: CandidateScheduler, parent: Any) -> Attempt | None:
        feedback: list[str] = []
        for width in self.fan_out:
            left = runner.remaining()
            if left is not None and left <= 0:
                break
            snapshot = list(feedback)
            jobs = [Job(fn=_bind(self.task, _call_cascaded, snapshot)) for _ in range(width)]
            attempts = runner.run(parent, jobs, first_wins=True)
            self.waves.append([a.result.branch_index for a in attempts])
            for att in attempts:
                if att.result.status == "committed":
                    return att
            for att in attempts:
                if att.result.status in ("failed", "timed_out"):
                    text = _failure_text(att)
                    if text:
                        feedback.append(text)
        return None


def _call_cascaded(task: Callable[..., Any], feedback: list[str], path: Path) -> Any:
    return task(path, list(feedback))


__all__ = ["BestOfN", "Cascaded", "Reflexion", "Speculate", "Tournament"]
