"""Ctrl-C at random instants of real commits: the parent is never left half committed."""

from __future__ import annotations

import random
from pathlib import Path

from tests.workspace.interrupt_trial import commit_seconds, expected_states, run_trial

FILES = 240
TRIALS = 6


def test_random_ctrl_c_during_commits_is_all_or_nothing(fs_root: Path, backend: str) -> None:
    rng = random.Random(12)
    states = expected_states(fs_root, FILES)
    window = commit_seconds(fs_root, backend, FILES) * 1.5
    results = [run_trial(fs_root, backend, FILES, window, rng, states) for _ in range(TRIALS)]
    assert [r.as_left for r in results if r.as_left == "partial"] == []
    assert [r.after_reopen for r in results if r.after_reopen == "partial"] == []
    assert [r.leftovers for r in results if r.leftovers] == []
    assert all(r.as_left == r.after_reopen for r in results)
