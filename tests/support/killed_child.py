"""Run a Python script that prints ``READY <token>`` once it is mid-work, then SIGKILL it.

Crash-recovery tests need a real process killed at a known point (a fork open, a mirror
live); this runs ``script`` with the repository importable, waits for its READY line and
kills it, whatever happens in between.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_until_ready_then_kill(script: str, *args: str) -> str:
    """The token the script printed after ``READY`` (the process is dead on return)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line.startswith("READY"), line + proc.stderr.read()
        return line.split()[1]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)


__all__ = ["REPO", "run_until_ready_then_kill"]
