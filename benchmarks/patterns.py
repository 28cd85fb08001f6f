"""Pattern latency figures from the issue (one run; prints a markdown table).

* ``Speculate`` of [0.1 s success, 10 s sleeper] returns within 0.3 s, sleeper killed;
* ``BestOfN(timeout=1)`` with a 30 s candidate returns within 1.5 s;
* 16 candidates on this machine: pattern overhead beyond the candidates' own work
  (wall time minus the longest candidate's own measured work) p50 < 50 ms;
* the time from the winner's return to the outcome (commit + killing losers);
* leak check: no open branch, child process or branch cgroup afterwards.

    /work/venv/bin/python benchmarks/patterns.py [--runs 10] [--backend auto] [--overhead-only]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branching_core.patterns import BestOfN, Speculate
from branching_core.sandbox import leftover_branch_cgroups, native, sandbox_available
from branching_core.workspace import Workspace, reaper


def _children() -> list[int]:
    me, kids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:
            kids.append(int(entry))
    return kids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def race(ws: Workspace, scratch: Path, isolate: bool) -> tuple[float, bool, float]:
    pidfile = scratch / f"sleeper-{time.monotonic_ns()}"
    won_at = scratch / f"won-{time.monotonic_ns()}"

    def winner(path: Path) -> bool:
        time.sleep(0.1)
        (path / "win.txt").write_text("ok")
        won_at.write_text(repr(time.monotonic())) if not isolate else None
        return True

    def sleeper(path: Path) -> bool:
        pidfile.write_text(str(os.getpid())) if not isolate else None
        time.sleep(10)
        return True

    start = time.monotonic()
    outcome = Speculate([winner, sleeper], isolate_processes=isolate)(ws)
    end = time.monotonic()
    assert outcome.committed and outcome.winner is not None
    assert outcome.all_results[1].status == "lost_race", outcome.all_results
    killed = not _alive(int(pidfile.read_text())) if pidfile.exists() else True
    tail = end - float(won_at.read_text()) if won_at.exists() else float("nan")
    return end - start, killed, tail


def best_of_n_timeout(ws: Workspace, isolate: bool) -> tuple[float, str]:
    def task(path: Path, attempt: int) -> tuple[bool, float]:
        time.sleep(30 if attempt == 0 else 0.05)
        return True, float(attempt)

    start = time.monotonic()
    outcome = BestOfN(task, n=2, timeout=1, isolate_processes=isolate)(ws)
    return time.monotonic() - start, outcome.all_results[0].status


def _cpu() -> float:
    """CPU seconds of this process and its reaped children: less noisy than wall time
    on a loaded machine, and what the pattern costs whatever the load."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def overhead(ws: Workspace, n: int, options: dict[str, Any]) -> float:
    """Wall time minus the longest candidate's own work (each sleeps 50 ms)."""

    def work(path: Path) -> tuple[bool, float]:
        t0 = time.monotonic()
        time.sleep(0.05)
        (path / "out.txt").write_text("x")
        return True, time.monotonic() - t0

    start = time.monotonic()
    outcome = BestOfN([work] * n, **options)(ws)
    wall = time.monotonic() - start
    assert outcome.committed
    own = max(r.return_value[1] for r in outcome.all_results if r.return_value)
    return wall - own


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "pattern latency").splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--overhead-only", action="store_true",
                    help="only the 16-candidate overhead rows and the leak check")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="forkdeck-bench-"))
    root = scratch / "ws"
    root.mkdir()
    (root / "seed.txt").write_text("seed")
    ws = Workspace(root, backend=args.backend)
    with ws.branch("warm-up", on_success=None):
        pass  # starts the workspace's own helpers (overlay mount helper) before the baseline
    native.drain_pool()
    baseline = set(_children())
    isolated_ok = sandbox_available()[0]
    print(f"backend: {ws.fstype}; cpus: {os.cpu_count()}; sandbox: {isolated_ok}\n")
    rows: list[tuple[str, str, str]] = []
    try:
        modes = [("fork", False)] + ([("sandbox", True)] if isolated_ok else [])
        for label, isolate in [] if args.overhead_only else modes:
            wall, killed, tail = race(ws, scratch, isolate)
            rows.append((f"Speculate [0.1 s ok, 10 s sleeper] ({label})",
                         f"{wall * 1000:.0f} ms", f"target < 300 ms; sleeper killed: {killed}"))
            if tail == tail:
                rows.append((f"winner returned -> outcome (commit + kill) ({label})",
                             f"{tail * 1000:.0f} ms", "target < 100 ms"))
            wall, status = best_of_n_timeout(ws, isolate)
            rows.append((f"BestOfN(timeout=1), 30 s candidate ({label})",
                         f"{wall * 1000:.0f} ms", f"target < 1500 ms; status {status}"))
        variants: list[tuple[str, dict[str, Any]]] = [
            ("thread (no timeout)", {}),
            ("fork (timeout=30)", {"timeout": 30}),
        ]
        if isolated_ok:
            variants.append(("sandbox (isolate_processes)", {"isolate_processes": True}))
        for label, options in variants:
            overhead(ws, 16, options)  # warm-up
            cpu0 = _cpu()
            samples = [overhead(ws, 16, options) for _ in range(args.runs)]
            cpu = (_cpu() - cpu0) / args.runs
            rows.append((f"16 candidates, overhead beyond own work, {label}",
                         f"p50 {statistics.median(samples) * 1000:.0f} ms / "
                         f"p95 {_p(samples, 0.95) * 1000:.0f} ms",
                         f"target p50 < 50 ms; CPU per call (caller + children) "
                         f"{cpu * 1000:.0f} ms"))
        time.sleep(0.2)
        reaper.drain(timeout=60)  # the background removal of discarded branches is no leak
        native.drain_pool()  # nor are idle pre-started sandbox executors
        leaks = (len(ws.open_branches()), len(set(_children()) - baseline),
                 len(leftover_branch_cgroups()))
        rows.append(("leak check: open branches / child processes / branch cgroups",
                     " / ".join(map(str, leaks)), "target 0 / 0 / 0"))
    finally:
        ws.close()
        shutil.rmtree(scratch, ignore_errors=True)
    print("| figure | measured | note |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
