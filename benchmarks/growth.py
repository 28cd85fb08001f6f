"""How forkdeck's costs grow: with tree size, with changed files, with open branches.

Issue 29 asks the docs to state cost growth from measurements, not from the design.
Each section prints one table (p50 of ``--reps`` samples, wall milliseconds) and the
load average it ran under (the machine is shared: compare within a table):

* ``create``: ``ws.branch()`` and its ``abort()`` in trees of 1,000 to 100,000 files
  (``--sizes``). Constant in tree size is the claim: an overlay branch is one mount.
* ``commit``: ``Branch.commit()`` of a branch that modified k files of a 10,000-file
  tree (``--changed``), and the least-squares slope in ms per changed file.
* ``memory``: 256 open sibling branches (``branch_many``): this process's RSS, the mount
  helper's RSS and the kernel's slab and page-table memory before and after, per branch.
* ``siblings``: ``branch_many(n)`` then ``abort_many`` of them, for n in 16, 64, 256,
  ``--rounds`` rounds each: ms per branch of the first round and the p50 of later ones
  (why the first round and large batches cost more is in docs/floors.md).

    python benchmarks/growth.py [--only create,commit,memory,siblings] [--json]
"""

from __future__ import annotations

import argparse
import json
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

from branching_core import Workspace  # noqa: E402
from branching_core.workspace import mount_helper, reaper  # noqa: E402
from branching_core.workspace.backends import spares  # noqa: E402

SECTIONS = ("create", "commit", "memory", "siblings")
DRAIN_SECONDS = 1.0


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def make_tree(root: Path, files: int, per_dir: int = 100) -> Path:
    """``files`` small files, ``per_dir`` to a directory (like a source tree)."""
    for i in range(files):
        d = root / f"d{i // per_dir:04d}"
        if i % per_dir == 0:
            d.mkdir(parents=True)
        (d / f"f{i % per_dir:03d}.txt").write_text(f"file {i}\n")
    return root


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def create(base: Path, sizes: list[int], reps: int) -> list[dict[str, Any]]:
    """Every tree is built first, then the sizes take turns each round, so a burst of
    load on the machine hits every size alike."""
    spaces = {files: Workspace(make_tree(base / f"create-{files}", files)) for files in sizes}
    made: dict[int, list[float]] = {files: [] for files in sizes}
    gone: dict[int, list[float]] = {files: [] for files in sizes}
    for r in range(reps + 1):
        for files, ws in spaces.items():
            box: dict[str, Any] = {}
            t_make = _ms(lambda r=r, ws=ws: box.setdefault(
                "b", ws.branch(f"b{r}", on_success=None)))
            t_gone = _ms(box["b"].abort)
            if r:  # the first is a warm-up (it starts the mount helper and probes)
                made[files].append(t_make)
                gone[files].append(t_gone)
    for ws in spaces.values():
        ws.close()
    return [{"files": files, "create_ms": round(statistics.median(made[files]), 3),
             "create_p90_ms": round(sorted(made[files])[int(0.9 * len(made[files]))], 3),
             "abort_ms": round(statistics.median(gone[files]), 3), "load": load()}
            for files in sizes]


def commit(base: Path, changed: list[int], reps: int) -> dict[str, Any]:
    ws = Workspace(make_tree(base / "commit", 10_000))
    files = sorted(p for p in ws.path.rglob("*.txt"))
    rows = []
    for k in changed:
        times = []
        for r in range(reps):
            with ws.branch(f"k{k}-{r}", on_success=None) as b:
                for p in files[:k]:
                    (b.path / p.relative_to(ws.path)).write_text(f"k {k} round {r}\n")
                times.append(_ms(b.commit))
        rows.append({"changed": k, "commit_ms": round(statistics.median(times), 3),
                     "load": load()})
    ws.close()
    xs = [row["changed"] for row in rows]
    ys = [row["commit_ms"] for row in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)
    return {"rows": rows, "slope_ms_per_file": round(slope, 4),
            "intercept_ms": round(my - slope * mx, 2)}


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, value = line.split(":", 1)
        out[name] = int(value.split()[0])
    return out


def memory(base: Path, n: int = 256) -> dict[str, Any]:
    ws = Workspace(make_tree(base / "memory", 10_000))
    ws.abort_many(ws.branch_many(["warm"], on_success=None))  # start the helper
    helper = mount_helper.running_helper()
    assert helper is not None
    before = (_rss_kib(os.getpid()), _rss_kib(helper.pid), _meminfo())
    branches = ws.branch_many([f"m{i}" for i in range(n)], on_success=None)
    for b in branches:  # each branch has been used: one file written in it
        (b.path / "touched.txt").write_text("x")
    after = (_rss_kib(os.getpid()), _rss_kib(helper.pid), _meminfo())
    ws.abort_many(branches)
    ws.close()

    def per(kib: int) -> float:
        return round(kib / n, 1)

    slab = after[2]["Slab"] - before[2]["Slab"]
    tables = after[2]["PageTables"] - before[2]["PageTables"]
    return {"branches": n,
            "process_rss_kib_per_branch": per(after[0] - before[0]),
            "helper_rss_kib_per_branch": per(after[1] - before[1]),
            "kernel_slab_kib_per_branch": per(slab),
            "page_tables_kib_per_branch": per(tables),
            "total_mib": round((after[0] - before[0] + after[1] - before[1] + slab + tables)
                               / 1024, 1),
            "load": load()}


def siblings(base: Path, batches: list[int], rounds: int, *, drain: bool = False,
             max_spares: int | None = None) -> list[dict[str, Any]]:
    """``drain``: wait for the background removal of the last round's branches, and a
    second for the helper's spares, before the next round; ``max_spares``: the spare pool's bound
    (``spares.MAX_SPARES``, 64), to see what the branches past it cost."""
    if max_spares is not None:
        spares.MAX_SPARES = max_spares
    rows = []
    for n in batches:
        ws = Workspace(make_tree(base / f"siblings-{n}", 1_000))
        per_branch = []
        trips = []
        ready: list[int] = []  # branches of the batch a mounted spare was waiting for
        listed_counts: list[int] = []  # ... per the pool (made or not)
        for r in range(rounds):
            helper = mount_helper.running_helper()
            trips_before = helper.round_trips if helper is not None else 0
            pool = spares.pool_for(ws.tree.backend.store_root)
            # pool entries are hints: the helper skips a spare when a request comes first
            listed = [spare for v in pool._mounted.values() for spare in v]
            listed_counts.append(min(n, len(listed)))
            ready.append(min(n, sum(1 for spare in listed if spare.exists())))
            box: dict[str, Any] = {}
            names = [f"r{r}-{i}" for i in range(n)]
            t = _ms(lambda names=names: box.setdefault(
                "b", ws.branch_many(names, on_success=None)))
            helper = mount_helper.running_helper()
            trips.append((helper.round_trips if helper is not None else 0) - trips_before)
            per_branch.append(t / n)
            ws.abort_many(box["b"])
            if drain:
                reaper.drain(60)
                # no request meanwhile: one (even a ping) stops the helper's spare-making
                time.sleep(DRAIN_SECONDS)
        ws.close()
        rows.append({"batch": n, "first_round_ms_per_branch": round(per_branch[0], 3),
                     "later_p50_ms_per_branch": round(statistics.median(per_branch[1:]), 3),
                     "later_max_ms_per_branch": round(max(per_branch[1:]), 3),
                     "spares_listed_last": listed_counts[-1],
                     "spares_there_p50": statistics.median(ready[1:]),
                     "spares_there_min": min(ready[1:]), "round_trips": trips[-1],
                     "load": load()})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--changed", default="10,100,1000")
    ap.add_argument("--batches", default="16,64,256")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--drain", action="store_true",
                    help="siblings: let background removal and spare-making finish between rounds")
    ap.add_argument("--max-spares", type=int, default=None,
                    help="siblings: bound of the spare pool (default: the engine's, 64)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s]
    for s in only:
        if s not in SECTIONS:
            ap.error(f"unknown section {s!r}; choose from {', '.join(SECTIONS)}")
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="forkdeck-growth-") as tmp:
        base = Path(tmp)
        if "create" in only:
            result["create"] = create(base, [int(x) for x in args.sizes.split(",")], args.reps)
        if "commit" in only:
            result["commit"] = commit(base, [int(x) for x in args.changed.split(",")],
                                      max(3, args.reps // 4))
        if "memory" in only:
            result["memory"] = memory(base)
        if "siblings" in only:
            result["siblings"] = siblings(base, [int(x) for x in args.batches.split(",")],
                                          args.rounds, drain=args.drain,
                                          max_spares=args.max_spares)
    if args.json:
        print(json.dumps(result))
        return
    for name, value in result.items():
        print(f"== {name}")
        rows = value["rows"] if isinstance(value, dict) and "rows" in value else value
        if isinstance(rows, dict):
            rows = [rows]
        for row in rows:
            print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
        if isinstance(value, dict) and "slope_ms_per_file" in value:
            print(f"  slope {value['slope_ms_per_file']} ms per changed file, "
                  f"intercept {value['intercept_ms']} ms")


if __name__ == "__main__":
    main()
