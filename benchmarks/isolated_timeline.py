"""Where one isolated candidate's time goes: a timeline with both sides' timestamps.

``benchmarks/floors.py`` says how far ``isolated_callable`` is from its floor; a profile
of the caller only shows it waiting. This runs ``BestOfN([work], commit=False,
isolate_processes=True)`` (the floors row) ``--rounds`` times and stamps the way:
the caller's steps (plan, fork, wait, end) with ``time.perf_counter_ns`` in the caller,
and the sandbox init's (fds, namespaces, filesystem, isolation, the candidate, its
result record) in the init, sent back in the candidate's return value and its stderr
(``CLOCK_MONOTONIC`` is one clock for every process). Each row is milliseconds since
the candidate call began: the median and the 20th percentile (the p20 is what the
machine's load moves least).

    python benchmarks/isolated_timeline.py [--rounds 40] [--thread]

``--thread`` times the in-process candidate instead (the floor's first part). The
wrappers here are measuring instruments, applied only in this process.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from branching_core import BestOfN, Workspace  # noqa: E402
from branching_core.patterns import _proc  # noqa: E402
from branching_core.sandbox import _caller, _child, _spawn, context  # noqa: E402

STAMPS: list[tuple[str, int]] = []


def stamp(name: str) -> None:
    STAMPS.append((name, time.perf_counter_ns()))


def around(owner: Any, attr: str, name: str, *, to_stderr: bool = False) -> None:
    """Stamp ``owner.attr``'s start and end (in the init: also on fd 2, which the
    caller captures, for what happens after the candidate returned)."""
    fn: Callable[..., Any] = getattr(owner, attr)

    def note(text: str) -> None:
        stamp(text)
        if to_stderr:
            try:
                os.write(2, f"STAMP {text} {STAMPS[-1][1]}\n".encode())
            except OSError:
                pass

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        note(f"{name} >")
        try:
            return fn(*args, **kwargs)
        finally:
            note(f"{name} <")

    setattr(owner, attr, wrapper)


def instrument() -> None:
    around(context, "plan_sandbox", "caller: plan_sandbox")
    around(_spawn, "_fork_init", "caller: fork (forking thread)")
    around(_spawn, "direct_init", "init: direct_init")
    around(_child, "place_fds", "init: place fds")
    around(_child, "enter_namespaces", "init: namespaces")
    around(_child, "build_filesystem", "init: filesystem steps")
    around(_child, "finish_isolation", "init: hostname, caps")
    around(context, "encode_value", "init: encode result", to_stderr=True)
    around(_spawn, "write_large_record", "init: result record", to_stderr=True)
    around(_child, "_single_threaded", "init: end check", to_stderr=True)
    around(_caller.SpawnedProcess, "_end", "caller: branch ended")
    around(_proc.SandboxHandle, "run", "caller: wait for the candidate")


def work(path: Path) -> tuple[bool, float, list[tuple[str, int]]]:
    stamp("init: candidate runs")
    (path / "out.txt").write_text("x")
    return True, 1.0, list(STAMPS)  # the init's copy: its own stamps since the fork


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--thread", action="store_true", help="the in-process candidate")
    args = ap.parse_args()
    instrument()
    options = {} if args.thread else {"isolate_processes": True}
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="forkdeck-timeline-") as tmp:
        root = Path(tmp) / "ws"
        (root / "files").mkdir(parents=True)
        for i in range(100):
            (root / "files" / f"f{i}.txt").write_text(f"original {i}\n")
        ws = Workspace(root)
        for _ in range(3):  # warm: imports, caches, the forking thread
            BestOfN([work], commit=False, **options)(ws)
        captured: list[str] = []
        original_run = _proc.SandboxHandle.run

        def run_and_keep_stderr(self: _proc.SandboxHandle, timeout: float | None) -> Any:
            try:
                return original_run(self, timeout)
            finally:
                captured.append(self._ctx.stderr)

        _proc.SandboxHandle.run = run_and_keep_stderr  # type: ignore[method-assign]
        for _ in range(args.rounds):
            STAMPS.clear()
            captured.clear()
            stamp("call >")
            outcome = BestOfN([work], commit=False, **options)(ws)
            stamp("call <")
            start = STAMPS[0][1]
            seen = list(STAMPS)
            assert outcome.winner is not None
            value = outcome.winner.return_value
            if isinstance(value, tuple) and len(value) == 3:
                seen += [(n, t) for n, t in value[2] if t >= start and n.startswith("init")]
            for text in captured:
                for line in text.splitlines():
                    if line.startswith("STAMP "):
                        name, _, when = line[6:].rpartition(" ")
                        seen.append((name, int(when)))
            for name, when in {n: t for n, t in seen}.items():
                rows.setdefault(name, []).append((when - start) / 1e6)
    load = os.getloadavg()
    print(f"{args.rounds} rounds, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'ms since the call began':<38} {'median':>8} {'p20':>8}")
    for name, values in sorted(rows.items(), key=lambda kv: statistics.median(kv[1])):
        ordered = sorted(values)
        print(f"{name:<38} {statistics.median(values):>8.3f} "
              f"{ordered[len(ordered) // 5]:>8.3f}")


if __name__ == "__main__":
    main()
