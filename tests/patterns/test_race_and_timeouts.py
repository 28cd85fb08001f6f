"""Races, timeouts and killing: the runner semantics every pattern shares."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from branching_core.patterns import BestOfN, Speculate
from branching_core.sandbox import ResourceLimits, sandbox_available
from branching_core.workspace import Workspace
from tests.patterns.conftest import files

needs_sandbox = pytest.mark.skipif(not sandbox_available()[0], reason="no sandbox here")


class Boom(Exception):
    pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_first_success_commits_and_loser_is_killed(ws: Workspace, tmp_path: Path) -> None:
    pidfile = tmp_path / "slow.pid"

    def slow(path: Path) -> bool:
        pidfile.write_text(str(os.getpid()))
        (path / "slow.txt").write_text("slow")
        time.sleep(30)
        return True

    def fast(path: Path) -> bool:
        while not pidfile.exists():  # make sure the loser is really running
            time.sleep(0.01)
        (path / "fast.txt").write_text("fast")
        return True

    outcome = Speculate([slow, fast])(ws)
    assert outcome.committed and outcome.winner is not None
    assert outcome.winner.branch_index == 1
    statuses = [(r.status, r.success) for r in outcome.all_results]
    assert statuses == [("lost_race", False), ("committed", True)]
    assert files(ws) == {"base.txt", "fast.txt"}
    assert not _pid_alive(int(pidfile.read_text()))


def test_per_candidate_timeout_kills_and_others_still_compete(ws: Workspace) -> None:
    def task(path: Path, attempt: int) -> tuple[bool, float]:
        (path / f"a{attempt}.txt").write_text("x")
        if attempt == 0:
            time.sleep(30)
        return True, float(attempt)

    outcome = BestOfN(task, n=3, timeout=0.5)(ws)
    assert [r.status for r in outcome.all_results] == ["timed_out", "aborted", "committed"]
    assert outcome.all_results[0].success is False
    assert outcome.winner is not None and outcome.winner.score == 2.0
    assert files(ws) == {"base.txt", "a2.txt"}


def test_overall_timeout_bounds_the_call(copy_ws: Workspace) -> None:
    def sleeper(path: Path) -> bool:
        time.sleep(30)
        return True

    outcome = Speculate([sleeper, sleeper], overall_timeout=0.3)(copy_ws)
    assert not outcome.committed
    assert {r.status for r in outcome.all_results} == {"timed_out"}


def test_max_parallel_leaves_unstarted_candidates_cancelled(copy_ws: Workspace) -> None:
    outcome = Speculate([lambda p: True, lambda p: True, lambda p: True], max_parallel=1)(copy_ws)
    assert outcome.all_results[0].status == "committed"
    assert [r.status for r in outcome.all_results[1:]] == ["cancelled", "cancelled"]


def test_forked_results_keep_their_types(copy_ws: Workspace) -> None:
    def boom(path: Path) -> bool:
        raise Boom("no")

    def pair(path: Path) -> tuple[bool, float]:
        return (True, 0.25)

    outcome = BestOfN([boom, pair], timeout=10)(copy_ws)
    failed, ok = outcome.all_results
    assert failed.status == "failed" and isinstance(failed.exception, Boom)
    assert ok.return_value == (True, 0.25) and isinstance(ok.return_value, tuple)


def test_nothing_succeeds_nothing_committed(ws: Workspace) -> None:
    def bad(path: Path) -> bool:
        (path / "junk").write_text("x")
        return False

    outcome = Speculate([bad, bad])(ws)
    assert not outcome.committed and outcome.winner is None
    assert [r.status for r in outcome.all_results] == ["failed", "failed"]
    assert files(ws) == {"base.txt"}


@needs_sandbox
def test_isolation_runs_in_the_sandbox_and_keeps_exception_types(ws: Workspace) -> None:
    mine = os.readlink("/proc/self/ns/pid")

    def where(path: Path) -> tuple[bool, float]:
        (path / "iso.txt").write_text(os.readlink("/proc/self/ns/pid"))
        return True, 0.5

    def boom(path: Path) -> bool:
        raise Boom("isolated")

    outcome = BestOfN([where, boom], isolate_processes=True, timeout=20)(ws)
    assert outcome.all_results[0].status == "committed"
    assert isinstance(outcome.all_results[1].exception, Boom)
    assert (ws.path / "iso.txt").read_text() != mine


@needs_sandbox
def test_resource_limits_imply_isolation_and_kill_on_timeout(copy_ws: Workspace) -> None:
    def slow(path: Path) -> bool:
        time.sleep(30)
        return True

    def ns(path: Path) -> bool:
        (path / "ns.txt").write_text(os.readlink("/proc/self/ns/pid"))
        return True

    outcome = BestOfN([slow, ns], resource_limits=ResourceLimits(), timeout=0.5)(copy_ws)
    assert [r.status for r in outcome.all_results] == ["timed_out", "committed"]
    assert (copy_ws.path / "ns.txt").read_text() != os.readlink("/proc/self/ns/pid")
