"""The terminal's live view: one line per candidate (state, elapsed, score).

Drawn on stderr, only when stderr is a terminal and ``--json`` is off, so pipes
and JSON consumers never see control sequences.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from branching_core.patterns import SpeculationResult


class LiveView:
    def __init__(self, labels: dict[int, str] | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.labels = labels or {}
        self.rows: dict[int, SpeculationResult] = {}
        self.started: dict[int, float] = {}
        self._drawn = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def __enter__(self) -> LiveView:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(1.0)
        self.draw()

    def update(self, result: SpeculationResult) -> None:
        with self._lock:
            self.rows[result.branch_index] = result
            if result.status == "running":
                self.started.setdefault(result.branch_index, time.monotonic())

    def _tick(self) -> None:
        while not self._stop.wait(0.1):
            self.draw()

    def _line(self, r: SpeculationResult) -> str:
        if r.status == "running" and r.branch_index in self.started:
            elapsed = time.monotonic() - self.started[r.branch_index]
        else:
            elapsed = r.duration
        label = self.labels.get(r.branch_index, "")
        score = f"score {r.score:.2f}" if r.status not in ("running", "pending") else ""
        depth = f"d{r.depth} " if r.depth else ""
        return f"  [{r.branch_index}] {depth}{r.status:<10} {elapsed:6.1f}s  {score:<12} {label}"

    def draw(self) -> None:
        with self._lock:
            rows = [self._line(r) for _, r in sorted(self.rows.items())]
            out = "\x1b[F" * self._drawn if self._drawn else ""
            out += "".join(f"\x1b[2K{line[:200]}\n" for line in rows)
            self._drawn = len(rows)
        self.stream.write(out)
        self.stream.flush()


__all__ = ["LiveView"]
