"""Ctrl-C at a random instant of a ``with ws.branch(...)`` commit, in a real child.

Shared by ``tests/workspace/test_interrupts.py`` (a few trials) and
``benchmarks/reliability.py`` (many). Each trial seeds a parent, starts a child that
edits a branch and leaves the ``with`` block (which commits), sends it SIGINT after a
random delay spread over the commit's duration, and classifies the parent as exactly
*before*, exactly *after*, or *partial*, both as the child left it and after the next
``Workspace`` open (which replays journals).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from branching_core import Workspace
from tests.workspace.scenario import many_edits, seed_many
from tests.workspace.treeutil import Snapshot, snapshot

REPO = Path(__file__).resolve().parents[2]


@dataclass
class TrialResult:
    as_left: str  # before | after | partial
    after_reopen: str
    interrupted: bool  # the child ended by KeyboardInterrupt
    leftovers: list[str]


def _child(ws_dir: Path, backend: str, files: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.workspace.scenario",
            "interrupted",
            str(ws_dir),
            backend,
            str(files),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def expected_states(base: Path, files: int) -> tuple[Snapshot, Snapshot]:
    ref = base / "reference"
    shutil.rmtree(ref, ignore_errors=True)
    ref.mkdir(parents=True)
    seed_many(ref, files)
    before = snapshot(ref)
    many_edits(ref, files)
    after = snapshot(ref)
    shutil.rmtree(ref)
    return before, after


def commit_seconds(base: Path, backend: str, files: int) -> float:
    """How long the child's commit takes here, uninterrupted (to spread the signals)."""
    ws_dir = base / "calibrate"
    shutil.rmtree(ws_dir, ignore_errors=True)
    ws_dir.mkdir(parents=True)
    seed_many(ws_dir, files)
    child = _child(ws_dir, backend, files)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    shutil.rmtree(ws_dir)
    return float(json.loads(out.splitlines()[-1])["commit_s"])


def run_trial(
    base: Path,
    backend: str,
    files: int,
    window_s: float,
    rng: random.Random,
    states: tuple[Snapshot, Snapshot],
) -> TrialResult:
    before, after = states
    ws_dir = base / "ws"
    shutil.rmtree(ws_dir, ignore_errors=True)
    ws_dir.mkdir(parents=True)
    seed_many(ws_dir, files)
    child = _child(ws_dir, backend, files)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.strip() == "ready", (line, child.stderr.read() if child.stderr else "")
    time.sleep(rng.uniform(0, window_s))
    try:
        child.send_signal(signal.SIGINT)
    except ProcessLookupError:
        pass
    _out, err = child.communicate(timeout=120)
    interrupted = "KeyboardInterrupt" in err

    def classify(state: Snapshot) -> str:
        return "before" if state == before else "after" if state == after else "partial"

    as_left = classify(snapshot(ws_dir))
    ws = Workspace(ws_dir, backend=backend)
    reopened = classify(snapshot(ws_dir))
    leftovers = [str(p) for p in ws.tree.store.journal_dir.iterdir()]
    leftovers += ws.tree.store.branch_ids()
    if (ws_dir / ".pydantic-deep").exists():
        leftovers.append(".pydantic-deep")
    return TrialResult(as_left, reopened, interrupted, leftovers)
