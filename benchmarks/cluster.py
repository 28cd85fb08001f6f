"""RayRunner figures on a local multi-node Ray cluster (one run; ratios in the same run).

* per-task overhead: a forkdeck candidate on Ray (snapshot cached, branch, fork,
  delta) vs a bare Ray task doing the same work (write one file), tasks one at a
  time so the figure is latency, not throughput;
* rollouts per second for trivial candidates (``BestOfN(commit=False)``) on 1, 2
  and 3 nodes (one CPU each);
* Speculate: from the winner's result to the loser's process (on the other node) dead;
* shipping a 10,000-file workspace: snapshot + pack + put on the driver, the first
  task on each node (materialises the tree once) vs later tasks on that node;
* delta size (pickled, as it travels) vs the bytes a candidate changed;
* sandbox start-up in this driver, alternating: ``subprocess.run(['true'])``,
  bubblewrap, sandboxed ``true`` through the native executor and on the Python path.

Nodes get ``--object-store-mb`` each (default 200). Prints a markdown table.

    .venv/bin/python benchmarks/cluster.py [--tasks 16] [--files 10000] [--file-kb 10]
        [--sandbox-rounds 40]
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ray
from ray.cluster_utils import Cluster

from branching_core.cluster import RayRunner
from branching_core.patterns import BestOfN, Speculate
from branching_core.workspace import Workspace

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def write_one(path: Path, i: int) -> bool:
    (Path(path) / f"out{i}.txt").write_text("x")
    return True


def change_bytes(path: Path, i: int, nbytes: int) -> bool:
    (Path(path) / "changed.bin").write_bytes(os.urandom(nbytes))
    return True


def loser(path: Path, notes: str) -> bool:
    Path(notes, f"loser.{os.getpid()}").write_text("")
    time.sleep(120)
    return True


def winner(path: Path, notes: str) -> bool:
    while not any(n.startswith("loser.") for n in os.listdir(notes)):
        time.sleep(0.01)
    Path(notes, "won").write_text(repr(time.time()))
    return True


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed child waits for its parent to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _watch_loser(notes: Path, dead: list[float]) -> None:
    while not any(n.startswith("loser.") for n in os.listdir(notes)):
        time.sleep(0.002)
    pid = int(next(n for n in os.listdir(notes) if n.startswith("loser.")).split(".")[1])
    while _running(pid):
        time.sleep(0.002)
    dead.append(time.time())


def _warm_nodes(runner: RayRunner, ws: Workspace, nodes: int, timeout: float = 120.0) -> None:
    """Run small calls until candidates have run on ``nodes`` distinct nodes."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < nodes and time.monotonic() < deadline:
        outcome = BestOfN(write_one, n=2 * nodes, commit=False, runner=runner)(ws)
        seen |= {r.node_id for r in outcome.all_results if r.node_id}


def bare_work(i: int) -> bool:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / f"out{i}.txt").write_text("x")
    return True


BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev",
         "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "true"]


def sandbox_rows(rounds: int, scratch: Path) -> list[tuple[str, str]]:
    """Start-up of ``true``: plain, bubblewrap, the native executor, the Python path;
    alternating rounds in this (Ray-importing) driver, p50 / p90 ms."""
    from branching_core.sandbox import run_command

    ws = scratch / "sandbox-ws"
    ws.mkdir()

    def sandboxed(native: str) -> None:
        os.environ["FORKDECK_NATIVE"] = native
        assert run_command(["true"], ws).exit_code == 0

    cases: dict[str, Any] = {
        "`subprocess.run(['true'])`": lambda: subprocess.run(["true"], check=True),
        "sandboxed `true`, native executor": lambda: sandboxed("1"),
        "sandboxed `true`, Python path (forks the driver)": lambda: sandboxed("0"),
    }
    if shutil.which("bwrap"):
        cases["bubblewrap `true`"] = lambda: subprocess.run(BWRAP, check=True)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for fn in cases.values():
            fn()
        for _ in range(rounds):
            for name, fn in cases.items():
                samples[name].append(timed(fn) * 1e3)
    finally:
        os.environ.pop("FORKDECK_NATIVE", None)
    plain = statistics.median(samples["`subprocess.run(['true'])`"])
    rows = []
    for name, values in samples.items():
        p50 = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        rows.append((f"{name} (p50 / p90, {rounds} alternating rounds)",
                     f"{p50:.2f} / {p90:.2f} ms ({p50 - plain:+.2f} ms vs plain)"))
    return rows


def make_ws(root: Path, files: int, size: int) -> Workspace:
    root.mkdir(parents=True)
    per_dir = 100
    for n in range(files):
        sub = root / f"d{n // per_dir:04}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{n % per_dir:03}.dat").write_bytes(os.urandom(size))
    return Workspace(root)


def timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--file-kb", type=int, default=10)
    ap.add_argument("--object-store-mb", type=int, default=200)
    ap.add_argument("--sandbox-rounds", type=int, default=40)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="forkdeck-bench-cluster-"))
    store = args.object_store_mb << 20
    rows: list[tuple[str, str]] = []

    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": store,
        "env_vars": {"FORKDECK_RAY_CACHE": str(base / "cache-0")}})
    ray.init(address=c.address, log_to_driver=False)
    try:
        small = make_ws(base / "small", 50, 1000)
        runner = RayRunner(max_in_flight=1)
        BestOfN(write_one, n=2, commit=False, runner=runner)(small)  # warm: cache, workers

        # 1. per-task latency, one at a time, 1 node
        bare = ray.remote(max_retries=0)(bare_work)
        ray.get(bare.remote(0))
        n = args.tasks
        t_bare = timed(lambda: [ray.get(bare.remote(i)) for i in range(n)]) / n
        t_fd = timed(lambda: BestOfN(write_one, n=n, commit=False, runner=runner)(small)) / n
        rows += [("bare Ray task, write one file (per task, sequential)", f"{t_bare * 1e3:.1f} ms"),
                 ("forkdeck candidate on Ray (per task, sequential)", f"{t_fd * 1e3:.1f} ms"),
                 ("added per task by forkdeck", f"{(t_fd - t_bare) * 1e3:.1f} ms "
                                                f"({t_fd / t_bare:.1f}x)")]

        # 2. rollouts/s on 1 vs 2 vs 3 nodes: each count warmed until every node has run
        # candidates (a new node's worker pool starts lazily), then the median of 3 calls
        free = RayRunner()
        k = 2 * n
        rates: list[float] = []
        for nodes in (1, 2, 3):
            if nodes > 1:
                c.add_node(num_cpus=1, object_store_memory=store,
                           env_vars={"FORKDECK_RAY_CACHE": str(base / f"cache-{nodes - 1}")})
                c.wait_for_nodes()
            _warm_nodes(free, small, nodes)
            rates.append(statistics.median(
                k / timed(lambda: BestOfN(write_one, n=k, commit=False, runner=free)(small))
                for _ in range(3)))
        for nodes, rate in zip((1, 2, 3), rates, strict=True):
            rows.append((f"rollouts/s, {k} trivial candidates, {nodes} node(s), median of 3",
                         f"{rate:.1f} ({rate / rates[0]:.2f}x)"))

        # 2b. Speculate: the loser on the other node, from the winner's result to its death
        notes = base / "notes"
        kills, returns = [], []
        for _ in range(3):
            notes.mkdir()
            dead: list[float] = []
            watcher = threading.Thread(target=_watch_loser, args=(notes, dead), daemon=True)
            watcher.start()
            Speculate([partial(loser, notes=str(notes)), partial(winner, notes=str(notes))],
                      timeout=300, runner=free)(small)
            returned = time.time()
            watcher.join(30)
            won = float((notes / "won").read_text())
            kills.append(dead[0] - won)
            returns.append(returned - won)
            shutil.rmtree(notes)
        rows += [("Speculate: winner's result -> loser on the other node killed (median of 3)",
                  f"{statistics.median(kills) * 1e3:.0f} ms"),
                 ("Speculate: winner's result -> call returns (includes locating the loser's "
                  "node via Ray's task events)", f"{statistics.median(returns) * 1e3:.0f} ms")]

        # 3. shipping a big workspace once per node
        big = make_ws(base / "big", args.files, args.file_kb * 1024)
        mb = args.files * args.file_kb / 1024
        ship = RayRunner()
        t_ship = timed(lambda: ship.ship(big.path))
        ship._shipped = None  # measure the pattern call from scratch
        t_first = timed(lambda: BestOfN(write_one, n=2, commit=False, runner=ship)(big))
        t_again = timed(lambda: BestOfN(write_one, n=2, commit=False, runner=ship)(big))
        rows += [(f"snapshot+pack+put, {args.files} files / {mb:.0f} MB (driver)",
                  f"{t_ship * 1e3:.0f} ms"),
                 ("first call on 3 nodes (ship + materialise once per node)",
                  f"{t_first * 1e3:.0f} ms"),
                 ("next call (cached on every node; rescan on the driver)",
                  f"{t_again * 1e3:.0f} ms"),
                 ("materialisations", str(ship.stats["materialisations"]))]

        # 4. delta size vs bytes changed
        rf = ship.remote_fn
        _snap, shipped = ship.ship(small.path)
        for nbytes in (100, 10_000, 1_000_000):
            def cand(path: Path, nb: int = nbytes) -> bool:
                return change_bytes(path, 0, nb)

            report = ray.get(rf.remote(shipped, "delta", cand, "fork", None, None, None))
            wire = len(pickle.dumps(report.delta))
            rows.append((f"delta for {nbytes} changed bytes (pickled)",
                         f"{wire} B (+{wire - nbytes} B)"))

        # 5. sandbox start-up beside plain `true` and bubblewrap, in this driver
        rows += sandbox_rows(args.sandbox_rounds, base)
    finally:
        ray.shutdown()
        c.shutdown()

    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average at the end: {load}\n")
    print("| figure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
