"""Sandbox start-up cost of this checkout against another one, measured alternately.

Two long-lived worker processes (one per checkout) are driven in turn, so load from
other processes hits both alike; prints p50/p25 per case. The other checkout is a
directory holding its ``branching_core`` (e.g. ``git archive <rev> branching_core |
tar -x -C /tmp/old``).

    python benchmarks/sandbox_compare.py /tmp/old [--rounds 150]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WORKER = r'''
import subprocess, sys, time
from branching_core.sandbox import BranchContext, run_command
ws = sys.argv[1]
def callable_once():
    with BranchContext(lambda p: None, ws) as ctx:
        ctx.wait()
cases = {
    "subprocess.run(['true'])": lambda: subprocess.run(["true"], check=True),
    "sandboxed true": lambda: run_command(["true"], ws),
    "sandboxed true, network=True": lambda: run_command(["true"], ws, network=True),
    "sandboxed callable": callable_once,
}
for case in cases.values():
    case()
for line in sys.stdin:
    start = time.perf_counter()
    cases[line.rstrip("\n")]()
    print((time.perf_counter() - start) * 1000, flush=True)
'''

CASES = ("subprocess.run(['true'])", "sandboxed true", "sandboxed true, network=True",
         "sandboxed callable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("other", type=Path, help="the checkout to compare against")
    parser.add_argument("--rounds", type=int, default=150)
    args = parser.parse_args()
    ws = tempfile.mkdtemp(prefix="forkdeck-compare-")
    workers = {}
    for name, root in (("other", args.other.resolve()), ("this", REPO)):
        env = {**os.environ, "PYTHONPATH": str(root)}
        workers[name] = subprocess.Popen([sys.executable, "-c", WORKER, ws], env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True)
    samples: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(args.rounds):
            for case in CASES:
                for name, proc in workers.items():
                    assert proc.stdin is not None and proc.stdout is not None
                    proc.stdin.write(case + "\n")
                    proc.stdin.flush()
                    samples.setdefault((name, case), []).append(float(proc.stdout.readline()))
    finally:
        for proc in workers.values():
            proc.kill()
            proc.wait()
        os.rmdir(ws)
    print(f"{args.rounds} alternating rounds, p50 / p25 in ms (load: {os.getloadavg()[0]:.1f})\n")
    print(f"| case | {args.other} | this checkout |")
    print("| --- | ---: | ---: |")
    for case in CASES:
        cells = []
        for name in ("other", "this"):
            values = samples[(name, case)]
            cells.append(f"{statistics.median(values):.2f} / "
                         f"{statistics.quantiles(values, n=4)[0]:.2f}")
        print(f"| {case} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
