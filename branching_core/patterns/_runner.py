"""The candidate runner every pattern is built on.

``CandidateScheduler.run`` starts N candidates in N sibling branches of one parent (the
workspace or an open branch) and waits for them under a per-candidate timeout and
an overall deadline. In *first-wins* mode the first success commits at once and the
still-running rest are killed (``lost_race``); in *collect* mode successful
candidates keep their branches open (status ``ready``) so the pattern can rank them
and call ``finalize``. ``close()`` (or leaving the ``with`` block) kills whatever
still runs and aborts every branch still open, so no pattern can leak one.

How a candidate runs is decided once per call (see ``_proc``): the sandbox when
isolation or limits are asked for, a forked child when it may have to be killed
(a timeout, an overall deadline or a race), else a thread of this process.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branching_core.errors import BranchClosedError, ConflictError, InvalidArgumentError
from branching_core.patterns._proc import CandidateTimeout, Handle, unwrap
from branching_core.patterns.result import (
    ABORTED,
    CANCELLED,
    COMMITTED,
    FAILED,
    LOST_RACE,
    TIMED_OUT,
    SpeculationResult,
)
from branching_core.patterns.runners import LocalRunner, LocalSession, Runner
from branching_core.sandbox.limits import ResourceLimits
from branching_core.workspace.branch import Branch

log = logging.getLogger(__name__)
READY = "ready"  # internal: finished successfully, branch open, awaiting finalize
RUNNING = "running"
Progress = Callable[[SpeculationResult], None]
Evaluate = Callable[[Path], float]


@dataclass
class Verdict:
    """How a candidate's return value reads: success, its own score, error context."""

    success: bool
    score: float | None = None
    context: str | None = None


def interpret(value: Any) -> Verdict:
    """``bool`` or ``(bool, float)`` (or ``(bool, str)`` for Cascaded); else truthiness."""
    if isinstance(value, tuple) and value:
        ok = bool(value[0])
        if len(value) >= 2:
            second = value[1]
            if isinstance(second, bool):
                return Verdict(ok)
            if isinstance(second, int | float):
                return Verdict(ok, score=float(second))
            if isinstance(second, str):
                return Verdict(ok, context=second)
        return Verdict(ok)
    return Verdict(bool(value))


@dataclass
class Job:
    """One candidate: ``fn(path)``, or a custom ``start(branch) -> Handle``.

    A ``fn`` with ``launch(branch) -> Handle`` and ``interpret(value) -> Verdict``
    methods (a *command candidate*, as the CLI builds) starts itself instead of
    being forked, so a shell command runs once, directly in its sandbox.
    """

    fn: Callable[[Path], Any] | None = None
    start: Callable[[Any], Handle] | None = None
    interpret: Callable[[Any], Verdict] = interpret
    prior_score: float | None = None
    parent: Any = None  # branch under which to run (default: the batch's parent)
    depth: int = 0
    parent_index: int | None = None


@dataclass
class Attempt:
    job: Job
    result: SpeculationResult
    branch: Any = None
    handle: Handle | None = None
    killed_for: str | None = None
    started: float | None = None
    start_error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class CandidateScheduler:
    """Runs candidates in branches; see the module docstring."""

    def __init__(
        self,
        *,
        prefix: str,
        timeout: float | None = None,
        overall_timeout: float | None = None,
        resource_limits: ResourceLimits | None = None,
        isolate_processes: bool = False,
        evaluate: Evaluate | None = None,
        max_parallel: int | None = None,
        progress: Progress | None = None,
        runner: Runner | None = None,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise InvalidArgumentError(f"timeout must be positive, got {timeout!r}")
        if overall_timeout is not None and overall_timeout <= 0:
            raise InvalidArgumentError(f"overall_timeout must be positive, got {overall_timeout!r}")
        if max_parallel is not None and max_parallel < 1:
            raise InvalidArgumentError(f"max_parallel must be at least 1, got {max_parallel!r}")
        self.prefix = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.timeout = timeout
        self.deadline = None if overall_timeout is None else time.monotonic() + overall_timeout
        self.limits = resource_limits
        self.isolate = isolate_processes or resource_limits is not None
        self.evaluate = evaluate
        self.max_parallel = max_parallel
        self.progress = progress
        self.backend = runner if runner is not None else LocalRunner()
        self.session: Any = None  # opened on the first ``run`` (see ``runners``)
        self.attempts: list[Attempt] = []
        self.interrupted = False
        self._lock = threading.RLock()
        self._commit_lock = threading.Lock()

    # -- public ---------------------------------------------------------------------------
    def run(
        self, parent: Any, jobs: Sequence[Job], *, first_wins: bool, keep_failed: bool = False
    ) -> list[Attempt]:
        """Run ``jobs`` as children of ``parent``; returns their attempts (in job order).

        ``keep_failed`` leaves a failed or timed-out attempt's branch open for the
        caller to inspect (Reflexion's critique); the caller must ``discard`` it.
        """
        race = first_wins and len(jobs) > 1
        batch = [self._new_attempt(job) for job in jobs]
        if not batch:
            return batch
        if self.session is None:
            self.session = self.backend.session(parent, timeout=self.timeout,
                                                deadline=self.deadline, evaluate=self.evaluate)
        stop = _Batch(first_wins=first_wins, race=race, keep_failed=keep_failed,
                      slots=threading.Semaphore(self.max_parallel or len(batch)))
        self._precreate(parent, batch)
        self._prestart(batch, race)
        if len(batch) == 1 and getattr(self.session, "waits_on_caller", False):
            return self._run_here(batch[0], parent, stop, batch)
        threads = [
            threading.Thread(target=self._work, args=(att, parent, stop, batch), daemon=True,
                             name=f"{self.prefix}-{att.result.branch_index}")
            for att in batch
        ]
        for t in threads:
            t.start()
        try:
            for att in batch:
                while not att.done.wait(0.25):
                    pass
        except BaseException:
            # Ctrl-C (or any other interruption): stop everything, then let it propagate.
            self.interrupted = True
            self._stop(stop, batch, CANCELLED)
            for att in batch:
                att.done.wait(1.0)
            raise
        return batch

    def _run_here(self, att: Attempt, parent: Any, stop: _Batch,
                  batch: list[Attempt]) -> list[Attempt]:
        """One candidate of a session whose handles wait on the calling thread
        (``waits_on_caller``: a remote task, whose ``run`` is a wait, interruptible, that
        cancels the task on an interruption before raising it): no thread start and no
        hand-over between threads per call. The outcome is the threaded path's: a
        Ctrl-C here cancels the candidate, waits for it the same way, and propagates."""
        try:
            self._work(att, parent, stop, batch, here=True)
        except BaseException:
            self.interrupted = True
            self._stop(stop, batch, CANCELLED)  # (``_work`` marked the candidate cancelled)
            raise
        return batch

    def finalize(self, ranked: Sequence[Attempt]) -> Attempt | None:
        """Commit the first of ``ranked`` that commits; every other open branch is aborted."""
        winner: Attempt | None = None
        for att in ranked:
            if winner is not None:
                break
            if att.branch is None or not att.branch.is_open:
                continue
            try:
                att.branch.commit()
            except ConflictError as exc:
                self._abort(att)
                att.result.status = LOST_RACE if exc.stale else FAILED
                att.result.success = False
                att.result.exception = exc
                self._emit(att)
                continue
            att.result.status = COMMITTED
            winner = att
            self._emit(att)
        losers = [a for a in self.attempts
                  if a is not winner and a.result.status in (READY, COMMITTED)]
        for att in losers:
            if att.result.status == READY:
                att.result.status = ABORTED
        self._abort_all(losers)
        for att in losers:
            self._emit(att)
        return winner

    def discard(self, att: Attempt, status: str = ABORTED) -> None:
        """Abort one attempt's branch (a pruned beam, a tournament loser)."""
        self._abort(att)
        if att.result.status in (READY, RUNNING, "pending"):
            att.result.status = status
        self._emit(att)

    def close(self) -> None:
        """Kill what still runs and abort every branch still open, children first."""
        for att in self.attempts:
            if att.handle is not None and not att.done.is_set():
                att.killed_for = att.killed_for or CANCELLED
                with contextlib.suppress(Exception):
                    att.handle.kill()
        by_depth: dict[int, list[Attempt]] = {}
        for att in self.attempts:
            by_depth.setdefault(att.result.depth, []).append(att)
        for depth in sorted(by_depth, reverse=True):
            self._abort_all(by_depth[depth])
        for att in self.attempts:
            if att.result.status in (READY, RUNNING, "pending"):
                att.result.status = CANCELLED if self.interrupted else ABORTED
                if att.result.status == CANCELLED:
                    att.result.success = False

    def release(self) -> None:
        """Close the runner's session (after ``close``): a remote runner sweeps its nodes."""
        if self.session is not None:
            session, self.session = self.session, None
            session.close()

    def results(self) -> list[SpeculationResult]:
        return [att.result for att in self.attempts]

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def __enter__(self) -> CandidateScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------
    def _new_attempt(self, job: Job) -> Attempt:
        with self._lock:
            index = len(self.attempts)
            res = SpeculationResult(branch_index=index, name=f"{self.prefix}-{index}",
                                    depth=job.depth, parent_index=job.parent_index)
            att = Attempt(job=job, result=res)
            self.attempts.append(att)
        return att

    def _precreate(self, parent: Any, batch: list[Attempt]) -> None:
        """When every candidate starts at once under the same parent, make all their
        branches in one ``branch_many`` call (one mount round trip instead of N)."""
        if len(batch) < 2 or (self.max_parallel is not None and self.max_parallel < len(batch)):
            return
        if any(a.job.parent is not None for a in batch):
            return
        branches = self.session.branch_many(parent, [a.result.name for a in batch])
        if branches is None:
            return
        for att, branch in zip(batch, branches, strict=True):
            att.branch = branch

    def _prestart(self, batch: list[Attempt], race: bool) -> None:
        """Fork every candidate of a precreated batch back to back, from one thread.

        Each ``fork()`` makes the caller's memory copy-on-write again, so whatever the
        caller writes between two forks is copied page by page; sixteen worker threads
        interleaving Python work with their forks paid that sixteen times over, and
        queued behind each other for the GIL while the first children already ran. A
        tight loop forks all of them while the caller touches almost nothing, then the
        workers only wait. Threads need no killing and are left to the workers.

        The loop runs in its own thread while this (the calling) thread waits: a
        Ctrl-C arriving inside ``os.fork``'s at-fork hooks would be swallowed as an
        "exception ignored", and the call would run on.
        """
        if (self._mode(race) == "thread" or not isinstance(self.session, LocalSession)
                or any(a.branch is None for a in batch)):
            return
        halt, gate, finished = threading.Event(), threading.Lock(), threading.Event()
        starter = threading.Thread(target=self._start_all,
                                   args=(batch, race, halt, gate, finished),
                                   daemon=True, name=f"{self.prefix}-start")
        try:
            starter.start()
            while not finished.wait(0.25):
                pass
        except BaseException:
            # Ctrl-C mid-batch (even inside ``starter.start()``): stop the starter, wait
            # out the one start it may be in (``gate``), then kill and reap everything
            # it started, since no worker will wait for it (``close`` aborts the branches).
            self.interrupted = True
            halt.set()
            with gate:
                pass
            for att in batch:
                if att.handle is not None:
                    att.killed_for = CANCELLED
                    with contextlib.suppress(BaseException):
                        att.handle.kill()
                        att.handle.run(0)
            raise

    def _start_all(self, batch: list[Attempt], race: bool, halt: threading.Event,
                   gate: threading.Lock, finished: threading.Event) -> None:
        from branching_core.sandbox.namespaces import shared_mask_plan

        try:
            with shared_mask_plan():  # sandboxes of one batch see the same host
                for att in batch:
                    if att.job.start is not None or hasattr(att.job.fn, "launch"):
                        continue  # a command candidate: the native executor starts it, not a fork
                    with gate:
                        if halt.is_set():
                            return
                        att.started = time.monotonic()
                        att.result.branch_path = att.branch.path
                        att.result.status = RUNNING
                        try:
                            att.handle = self._start(att, race)
                        except Exception as exc:
                            att.start_error = exc  # its worker reports it as its failure
        finally:
            finished.set()

    def _mode(self, race: bool) -> str:
        if self.isolate:
            return "sandbox"
        if race or self.timeout is not None or self.deadline is not None:
            return "fork"
        return "thread"

    def _start(self, att: Attempt, race: bool) -> Handle:
        return self.session.start(att.job, att.branch, self._mode(race), self.limits)

    def _budget(self, att: Attempt) -> float | None:
        limits = []
        if self.timeout is not None:
            assert att.started is not None
            limits.append(att.started + self.timeout - time.monotonic())
        if self.deadline is not None:
            limits.append(self.deadline - time.monotonic())
        return max(0.0, min(limits)) if limits else None

    def _work(self, att: Attempt, parent: Any, batch: _Batch, siblings: list[Attempt],
              *, here: bool = False) -> None:
        """One candidate, on a thread of its own (or on the caller's, ``here``: then an
        interruption, which only the calling thread receives, propagates)."""
        res = att.result
        have_slot = False
        try:
            if att.started is not None:  # started by ``_prestart``
                self._emit(att)
                if att.start_error is not None:
                    raise att.start_error
                assert att.handle is not None
                self._finish(att, att.handle, batch, siblings, here=here)
                return
            while not batch.slots.acquire(timeout=0.05):
                if batch.stopped is not None:
                    break
            else:
                have_slot = True
            if batch.stopped is not None or not have_slot:
                res.status = CANCELLED
                return
            left = self.remaining()
            if left is not None and left <= 0:
                res.status = CANCELLED
                res.exception = CandidateTimeout("the overall timeout passed before it started")
                return
            if att.branch is None:
                owner = att.job.parent if att.job.parent is not None else parent
                att.branch = self.session.branch(owner, res.name)
            res.branch_path = att.branch.path
            att.started = time.monotonic()
            res.status = RUNNING
            self._emit(att)
            handle = self._start(att, batch.race)
            with self._lock:
                att.handle = handle
                if batch.stopped is not None:
                    att.killed_for = batch.stopped
                    handle.kill()
            self._finish(att, handle, batch, siblings, here=here)
        except BaseException as exc:
            if here and not isinstance(exc, Exception):
                res.status, res.success = CANCELLED, False
                raise
            if res.status in (RUNNING, "pending"):
                res.status = att.killed_for or FAILED
                res.exception = unwrap(exc)
                res.success = False
        finally:
            if have_slot:
                batch.slots.release()
            if att.started is not None:
                res.duration = time.monotonic() - att.started
            keep = (READY, COMMITTED)
            if batch.keep_failed:
                keep = (READY, COMMITTED, FAILED, TIMED_OUT)
            if res.status not in keep:
                self._abort(att)
            self._emit(att)
            att.done.set()

    def _finish(self, att: Attempt, handle: Handle, batch: _Batch, siblings: list[Attempt],
                *, here: bool = False) -> None:
        res = att.result
        try:
            value = handle.run(self._budget(att))
        except CandidateTimeout as exc:
            res.status = att.killed_for or TIMED_OUT
            res.exception = exc if res.status == TIMED_OUT else None
            return
        except BaseException as exc:
            if here and not isinstance(exc, Exception):
                raise  # the caller's Ctrl-C: the handle cancelled the candidate already
            res.status = att.killed_for or FAILED
            res.exception = None if att.killed_for else unwrap(exc)
            return
        if att.killed_for is not None:
            res.status = att.killed_for
            return
        res.return_value = value
        verdict = getattr(att.job.fn, "interpret", att.job.interpret)(value)
        res.error_context = verdict.context
        if not verdict.success:
            res.status = FAILED
            res.score = verdict.score if verdict.score is not None else 0.0
            return
        try:
            res.score = self._score(att, verdict)
        except Exception as exc:
            res.status = FAILED
            res.exception = exc
            return
        res.success = True
        if not batch.first_wins:
            res.status = READY
            return
        with self._commit_lock:
            if batch.stopped is not None:
                res.status, res.success = (batch.stopped, False)
                return
            try:
                att.branch.commit()
            except ConflictError as exc:
                self._abort(att)
                res.success = False
                res.status = LOST_RACE if exc.stale else FAILED
                res.exception = None if exc.stale else exc
                return
            res.status = COMMITTED
            batch.winner = att
        self._stop(batch, siblings, LOST_RACE)

    def _score(self, att: Attempt, verdict: Verdict) -> float:
        if self.evaluate is not None:
            return float(self.session.evaluate(self.evaluate, att.branch))
        if verdict.score is not None:
            return verdict.score
        if att.job.prior_score is not None:
            return float(att.job.prior_score)
        return 1.0

    def _stop(self, batch: _Batch, siblings: list[Attempt], reason: str) -> None:
        with self._lock:
            if batch.stopped is None:
                batch.stopped = reason
            victims = []
            for other in siblings:
                if other is batch.winner or other.done.is_set():
                    continue
                other.killed_for = other.killed_for or reason
                if other.handle is not None:
                    victims.append(other.handle)
        for handle in victims:
            with contextlib.suppress(Exception):
                handle.kill()

    def _abort(self, att: Attempt) -> None:
        branch = att.branch
        if branch is not None and branch.is_open:
            try:
                branch.abort()
            except BranchClosedError:
                # It committed (or left a commit pending for the next open's replay)
                # while we waited for its lock: nothing to throw away.
                pass
            except Exception as exc:
                log.warning("aborting %s failed: %s", branch.branch_path, exc)

    def _abort_all(self, attempts: Sequence[Attempt]) -> None:
        """Abort many branches at once. Local siblings go to their parent's
        ``abort_many`` (one unmount round trip and one removal job for all of them);
        anything else (a remote runner's branches, a batch refused because one of them
        committed meanwhile) is aborted one by one, in threads, since those overlap."""
        todo = [a for a in attempts if a.branch is not None and a.branch.is_open]
        by_parent: dict[int, list[tuple[Attempt, Branch]]] = {}
        rest: list[Attempt] = []
        for att in todo:
            if isinstance(att.branch, Branch):
                by_parent.setdefault(id(att.branch.parent), []).append((att, att.branch))
            else:
                rest.append(att)
        for group in by_parent.values():
            siblings = [branch for _att, branch in group]
            try:
                siblings[0].parent.abort_many(siblings)
            except BranchClosedError:  # one committed while we waited: the rest one by one
                rest.extend(att for att, _branch in group)
            except Exception as exc:
                log.warning("aborting %d branches failed: %s", len(group), exc)
        if len(rest) <= 1:
            for att in rest:
                self._abort(att)
            return
        threads = [threading.Thread(target=self._abort, args=(a,), daemon=True) for a in rest]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _emit(self, att: Attempt) -> None:
        if att.branch is not None:  # where it ran: a remote runner's node, else None
            att.result.node_id = getattr(att.branch, "cluster_node_id", None)
        if att.started is not None and att.result.status in (RUNNING,):
            att.result.duration = time.monotonic() - att.started
        if self.progress is not None:
            with contextlib.suppress(Exception):
                self.progress(att.result)


@dataclass
class _Batch:
    first_wins: bool
    race: bool
    keep_failed: bool
    slots: threading.Semaphore
    stopped: str | None = None
    winner: Attempt | None = None


def rank(attempts: Sequence[Attempt]) -> list[Attempt]:
    """Ready attempts, best score first; ties go to the lower index (deterministic)."""
    ready = [a for a in attempts if a.result.status == READY]
    return sorted(ready, key=lambda a: (-a.result.score, a.result.branch_index))


__all__ = ["READY", "Attempt", "CandidateScheduler", "Job", "Verdict", "interpret", "rank"]
