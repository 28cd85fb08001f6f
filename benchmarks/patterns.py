"""Pattern latency figures from the issue (one run; prints a markdown table).

* ``Speculate`` of [0.1 s success, 10 s sleeper] returns within 0.3 s, sleeper killed;
* ``BestOfN(timeout=1)`` with a 30 s candidate returns within 1.5 s;
* 16 candidates on this machine: pattern overhead beyond the candidates' own work
  (wall time minus the longest candidate's own measured work) p50 < 50 ms;
* the time from the winner's return to the outcome (commit + killing losers);
* what the process modes cost beyond thread mode (wall p50 and CPU, per candidate);
* leak check: no open branch, child process or branch cgroup afterwards.

With ``--breakdown`` it then says where a process-mode candidate's CPU goes (the
caller's ``fork``, the child's start and exit, the sandbox's keeper and init phases; see
``patterns_breakdown.py``), so a change to the sandbox's start can be judged phase by phase.

    /work/venv/bin/python benchmarks/patterns.py [--runs 10] [--backend auto] [--overhead-only]
                                                 [--breakdown]
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

from branching_core.errors import ResourceLimitError
from branching_core.patterns import BestOfN, Speculate
from branching_core.sandbox import (
    ResourceLimits,
    leftover_branch_cgroups,
    native,
    sandbox_available,
)
from branching_core.sandbox.cgroups import create_branch_cgroups, owner_tag
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


LIMITS = ResourceLimits(memory="256M", cpu=1.0, pids=256)


def _limits_ok(limits: ResourceLimits) -> bool:
    try:
        create_branch_cgroups(limits).remove()
    except ResourceLimitError as exc:
        print(f"(no resource_limits row: {exc})")
        return False
    return True


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "pattern latency").splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--overhead-only", action="store_true",
                    help="only the 16-candidate overhead rows and the leak check")
    ap.add_argument("--breakdown", action="store_true",
                    help="then where a process-mode candidate's CPU goes, phase by phase")
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
            if _limits_ok(LIMITS):
                variants.append(("sandbox + resource_limits (memory, cpu, pids)",
                                 {"resource_limits": LIMITS}))
        for _label, options in variants:
            overhead(ws, 16, options)  # warm-up
        # Alternating samples (one call of each variant per round): the machine's load
        # drifts, and the process modes are judged by their difference to thread mode.
        walls: dict[str, list[float]] = {label: [] for label, _ in variants}
        cpus: dict[str, list[float]] = {label: [] for label, _ in variants}
        for _ in range(args.runs):
            for label, options in variants:
                cpu0 = _cpu()
                walls[label].append(overhead(ws, 16, options))
                cpus[label].append(_cpu() - cpu0)
        base = variants[0][0]
        for label, _options in variants:
            wall, cpu = statistics.median(walls[label]), sum(cpus[label]) / args.runs
            rows.append((f"16 candidates, overhead beyond own work, {label}",
                         f"p50 {wall * 1000:.0f} ms / p95 {_p(walls[label], 0.95) * 1000:.0f} ms",
                         f"target p50 < 50 ms; CPU per call (caller + children) "
                         f"{cpu * 1000:.0f} ms ({cpu / 16 * 1000:.1f} ms per candidate)"))
        for label, _options in variants[1:]:
            extra_wall = statistics.median(walls[label]) - statistics.median(walls[base])
            extra_cpu = (sum(cpus[label]) - sum(cpus[base])) / args.runs
            rows.append((f"process-mode cost beyond thread mode, {label}",
                         f"wall p50 +{extra_wall * 1000:.0f} ms",
                         f"CPU +{extra_cpu * 1000:.0f} ms per call, "
                         f"+{extra_cpu / 16 * 1000:.1f} ms per candidate"))
        time.sleep(0.2)
        reaper.drain(timeout=60)  # the background removal of discarded branches is no leak
        native.drain_pool()  # nor are idle pre-started sandbox executors
        ours = f"b{owner_tag()}-"  # other sessions' branch cgroups may share the parents
        leaks = (len(ws.open_branches()), len(set(_children()) - baseline),
                 len([p for p in leftover_branch_cgroups() if p.name.startswith(ours)]))
        rows.append(("leak check: open branches / child processes / branch cgroups",
                     " / ".join(map(str, leaks)), "target 0 / 0 / 0"))
    finally:
        ws.close()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"load average: {os.getloadavg()[0]:.2f}\n")
    print("| figure | measured | note |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.breakdown:
        import patterns_breakdown  # beside this script

        with patterns_breakdown._workspace(args.backend) as (bws, bscratch):
            for label, table in patterns_breakdown.breakdown(bws, max(1, args.runs // 2),
                                                             bscratch, isolated_ok):
                print(f"\n### where the CPU goes: {label}\n\n{table}")


if __name__ == "__main__":
    main()
