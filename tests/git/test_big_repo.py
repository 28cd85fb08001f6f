"""Issue 25: a repository with 100,000 tracked files. Creating a branch stays O(1) (the
overlay backend mounts, whatever the tree's size), and ``git status`` inside a branch's
sandbox is within 2x of the parent's, measured in the same run, the same way (inside a
sandbox of each). The repository is built once per session (``tests/git/bigrepo.py``:
fast-import plus one checkout, ~5-25 s on a loaded 2-core machine).

Timings on a shared machine are noisy, so each figure is the best of several runs and
the comparisons carry a small absolute allowance for scheduling noise; the figures
themselves are in ``docs/git.md`` (``benchmarks/git.py``). Whole test: ~60 s at load
average 14 on this shared 2-core machine, ~190 s at load 20 (mostly the checkout)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from branching_core.sandbox import run_command
from branching_core.workspace import Workspace

from .bigrepo import TIMED_STATUS, build_repo

FILES = 100_000
NOISE_S = 0.05  # scheduling noise allowed on top of each ratio (8 engineers share 2 cores)
STATUS_NOISE_S = 0.2  # a git status here takes 0.5-1 s under that load


@pytest.fixture(scope="session")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repo(tmp_path_factory.mktemp("bigrepo") / "repo", FILES)


def status_s(path: Path) -> float:
    result = run_command(TIMED_STATUS, path)
    assert result.exit_code == 0, result.stderr
    return int(result.stdout.strip()) / 1e9


def best_create_s(ws: Workspace, runs: int = 9) -> float:
    times = []
    for i in range(runs):
        started = time.perf_counter()
        b = ws.branch(f"t{i}", on_success=None)
        times.append(time.perf_counter() - started)
        b.abort()
    return min(times)


@pytest.mark.big_repo
def test_branch_create_is_constant_and_git_status_within_2x(
    big_repo: Path, tmp_path: Path
) -> None:
    ws = Workspace(big_repo)
    if ws.fstype != "overlay":
        pytest.skip(f"O(1) branch creation is the overlay backend's (here: {ws.fstype})")
    small = tmp_path / "small"
    small.mkdir()
    (small / "a.txt").write_text("a\n")
    small_ws = Workspace(small)
    big_s, small_s = best_create_s(ws), best_create_s(small_ws)
    assert big_s <= 3 * small_s + NOISE_S, (big_s, small_s)
    b = ws.branch("status", on_success=None)
    try:
        # alternate parent and branch runs so both see the same load; best of each
        parent_runs, branch_runs = [], []
        for _ in range(4):
            parent_runs.append(status_s(big_repo))
            branch_runs.append(status_s(b.path))
        assert b.changes().all_paths == []  # git refreshed the branch's index: no change
    finally:
        b.abort()
    parent_s, branch_s = min(parent_runs), min(branch_runs)
    assert branch_s <= 2 * parent_s + STATUS_NOISE_S, (branch_runs, parent_runs)
