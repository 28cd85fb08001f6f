"""Sandbox start-up cost and leak check (one run; prints a markdown table).

Targets from the issue: sandboxed ``true`` p50 <= 10 ms more than
``subprocess.run(["true"])``; a sandboxed Python callable p50 <= 15 ms more than a
bare ``os.fork``; 100 sandboxes started and aborted leave no process, mount or
cgroup behind.

    /work/venv/bin/python benchmarks/sandbox.py [--runs 100]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branching_core.errors import ResourceLimitError
from branching_core.sandbox import (
    BranchContext,
    ResourceLimits,
    SandboxedCommand,
    leftover_branch_cgroups,
    run_command,
    sandbox_available,
)


def _time(fn: Callable[[], object], runs: int) -> list[float]:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _pct(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[int(q) - 1]


def _bare_fork() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _processes_with(marker: str) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    count += marker.encode() in fh.read()
            except OSError:
                pass
    return count


def _mount_points() -> set[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return {line.split()[4] for line in fh}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    ok, why = sandbox_available()
    if not ok:
        raise SystemExit(f"sandbox unavailable: {why}")
    ws = Path(tempfile.mkdtemp(prefix="forkdeck-bench-"))
    try:
        plain_true = _time(lambda: subprocess.run(["true"], check=True), args.runs)
        sandbox_true = _time(lambda: run_command(["true"], ws), args.runs)
        fork = _time(_bare_fork, args.runs)

        def callable_once() -> None:
            with BranchContext(lambda p: None, ws) as ctx:
                ctx.wait()

        sandbox_callable = _time(callable_once, args.runs)

        rows = [
            ("`subprocess.run(['true'])`", plain_true, None),
            ("sandboxed `true` (run_command)", sandbox_true, plain_true),
            ("bare `os.fork` + wait", fork, None),
            ("sandboxed callable (BranchContext)", sandbox_callable, fork),
        ]
        print(f"Sandbox start-up, {args.runs} runs each (ms)\n")
        print("| case | p50 | p95 | p50 - baseline | p50 ratio | target |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        for name, samples, base in rows:
            p50, p95 = statistics.median(samples), _pct(samples, 95)
            if base is None:
                print(f"| {name} | {p50:.2f} | {p95:.2f} | baseline | 1.0x | |")
                continue
            diff = p50 - statistics.median(base)
            limit = 10.0 if base is plain_true else 15.0
            verdict = "met" if diff <= limit else "MISSED"
            print(f"| {name} | {p50:.2f} | {p95:.2f} | +{diff:.2f} |"
                  f" {p50 / statistics.median(base):.1f}x | <= +{limit:.0f} ms: {verdict} |")

        # Leak check: 100 sandboxes with background children, started and aborted.
        try:
            limits: ResourceLimits | None = ResourceLimits(pids=64, memory="256M")
            SandboxedCommand(["true"], ws, limits=limits).wait(30)
        except ResourceLimitError as exc:
            limits = None
            print(f"\n(cgroup limits unavailable, leak loop runs without: {exc})")
        marker = f"{8000 + secrets.randbelow(999)}.{secrets.randbelow(10**6):06d}"
        mounts_before = _mount_points()
        cgroups_before = set(leftover_branch_cgroups())
        start = time.perf_counter()
        for _ in range(100):
            up = threading.Event()
            branch = SandboxedCommand(
                f"setsid sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 &"
                f" echo up; sleep {marker}",
                ws, limits=limits, on_output=lambda _stream, _line, up=up: up.set(),
            )
            up.wait(30)  # abort only once the background children exist
            branch.abort()
        loop_s = time.perf_counter() - start
        deadline = time.monotonic() + 5
        while _processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        leaked_procs = _processes_with(marker)
        new_mounts = sorted(
            m for m in _mount_points() - mounts_before
            if m in ("/tmp", "/dev", "/proc", "/run") or m.startswith(str(ws))
        )
        leaked_cgroups = sorted(set(leftover_branch_cgroups()) - cgroups_before)
        print(f"\nLeak check: 100 sandboxes (limits: {limits}) started and aborted"
              f" in {loop_s:.2f} s\n")
        print("| resource | leaked |")
        print("| --- | ---: |")
        print(f"| processes (`sleep {marker}`) | {leaked_procs} |")
        print(f"| host mounts | {len(new_mounts)} |")
        print(f"| branch cgroups | {len(leaked_cgroups)} |")
    finally:
        shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()
