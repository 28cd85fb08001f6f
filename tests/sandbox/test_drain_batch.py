"""One ``select`` batch can hold the keeper's (or init's) pidfd *before* a stream's last
bytes: the drain must then only read the rest. It used to treat the record as a command
that ended early and unregister the pidfd a second time (``KeyError: 'N is not
registered'``, seen once in ``test_pool_attributes`` under load). Here every end of a
real sandboxed command is made ready before the first ``select`` and the batch is put
in that order, pidfd first, so the race is the rule.
"""

from __future__ import annotations

import os
import selectors
import time
from pathlib import Path
from typing import Any

import pytest

from branching_core import sandbox
from branching_core.sandbox import _caller


def _is_pidfd(fd: int) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[pidfd]"
    except OSError:
        return False


class _PidfdFirst(selectors.DefaultSelector):
    """The real selector, waiting until the command has surely ended: its first batch
    lacks the pidfd (as when the process's exit is seen a moment after its output),
    later batches put it first, before the streams' ends."""

    batches = 0

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        time.sleep(0.2)
        events = super().select(timeout)
        self.batches += 1
        if self.batches == 1:
            return [event for event in events if not _is_pidfd(event[0].fd)]
        return sorted(events, key=lambda event: not _is_pidfd(event[0].fd))


@pytest.mark.parametrize("one_fork", ["1", "0"])
def test_a_batch_with_the_pidfd_first_ends_the_drain_cleanly(
    ws: Path, monkeypatch: pytest.MonkeyPatch, one_fork: str
) -> None:
    monkeypatch.setenv("FORKDECK_ONE_FORK", one_fork)
    monkeypatch.setattr(_caller.selectors, "DefaultSelector", _PidfdFirst)
    for _ in range(3):
        result = sandbox.run_command("echo out; echo err >&2; exit 3", str(ws))
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
