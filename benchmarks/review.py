"""Diff-report figures: ``build_diff_report`` for 10 branches x 100 changed files (one run).

Target from the issue: < 200 ms for 10 branches x 100 changed files.

Setup: a workspace of ``--files`` text files (80 lines each) on the automatic backend;
``--branches`` workspace branches each rewrite the same ``--changed`` files (half of the
branches agree on each file, the rest differ; one of the changes is a rename), plus one
new file per branch.
Rows (p50 / min over ``--reps`` runs):

* ``report``: ``build_diff_report`` as used by the judge and the picker (every file read
  and hashed once; diffs rendered on first access);
* ``report + every diff``: the same, then every ``unified_diff_vs_parent`` read (one
  ``difflib`` run per distinct result);
* ``baseline: naive difflib``: what a straightforward builder does: for every branch and
  changed path, read the parent and branch file and run ``difflib.unified_diff``.

    /work/venv/bin/python benchmarks/review.py [--reps 9] [--branches 10] [--changed 100]
    /work/venv/bin/python benchmarks/review.py --combine [--backend copy] [--reps 9]

``--combine``: the combined merge instead (target < 100 ms for 100 paths). Two branches
each change the same ``--changed`` files of a fresh fork per run (one line near the top,
one near the bottom); the selection takes half the paths per file (alternating branches)
and half per hunk (the top hunk from one branch, the bottom from the other). Timed:
``merge_or_select("combine", ...)`` (plan, one workspace branch, one journaled commit,
fork resolved). Baseline in the same run: ``merge_or_select("pick:a")`` of an identical
fork (the whole-branch merge of the same 100 paths); and ``combine_preview`` alone (the
planning: reading, difflib, overlap checks), the part that is the combine's own.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branching_core.review import build_diff_report
from branching_core.workspace import Workspace

LINES = 80


def make_project(root: Path, files: int) -> list[str]:
    paths = []
    for i in range(files):
        rel = f"pkg{i % 10}/mod{i}.py"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("".join(f"value_{i}_{n} = {n}\n" for n in range(LINES)))
        paths.append(rel)
    return paths


def change_branch(path: Path, index: int, changed: list[str], moved: str) -> None:
    for k, rel in enumerate(changed):
        text = (path / rel).read_text().splitlines(keepends=True)
        variant = "agreed" if (index + k) % 2 == 0 else f"branch{index}"
        text[k % LINES] = f"changed = {variant!r}\n"
        text.append(f"# edited by {variant}\n")
        (path / rel).write_text("".join(text))
    os.rename(path / moved, path / moved.replace("mod", "renamed_mod"))  # one rename
    (path / f"new_{index}.txt").write_text(f"new file {index}\n")


def naive(parent: Path, runtimes: list[Any]) -> int:
    total = 0
    for rt in runtimes:
        changes = rt.ws_branch.changes()
        for rel in changes.all_paths:
            old_p, new_p = parent / rel, Path(rt.ws_branch.path) / rel
            old = old_p.read_text().splitlines(True) if old_p.is_file() else []
            new = new_p.read_text().splitlines(True) if new_p.is_file() else []
            total += len(list(difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}")))
    return total


def timed(fn: Callable[[], Any], reps: int) -> tuple[float, float]:
    fn()  # warm-up (page cache, imports)
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples), min(samples)


_ROUND = [0]


async def _fork_for_combine(root: Path, paths: list[str], backend: str = "auto") -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from branching_core.fork import BranchSpec, ForkCoordinator

    coord = ForkCoordinator(
        Agent(TestModel(call_tools=[])), workspace=Workspace(root, backend=backend)
    )
    await coord.fork([BranchSpec("a", "x"), BranchSpec("b", "y")], parent_history=[])
    await coord.wait(timeout=60)
    _ROUND[0] += 1  # every fork changes the lines anew (the parent has the last merge)
    for rt in coord.branches.values():
        d = Path(rt.ws_branch.path)
        for rel in paths:
            lines = (d / rel).read_text().splitlines(keepends=True)
            lines[2] = f"top = {rt.label!r}, {_ROUND[0]}\n"
            lines[-3] = f"bottom = {rt.label!r}, {_ROUND[0]}\n"
            (d / rel).write_text("".join(lines))
    return coord


def bench_combine(root: Path, paths: list[str], reps: int, backend: str = "auto") -> None:
    import asyncio

    def selection() -> dict[str, Any]:
        sel: dict[str, Any] = {}
        for k, rel in enumerate(paths):
            if k % 2 == 0:
                sel[rel] = "a" if k % 4 == 0 else "b"
            else:
                sel[rel] = ["a:0", "b:1"]
        return sel

    async def one(action: str) -> float:
        coord = await _fork_for_combine(root, paths, backend)
        t0 = time.perf_counter()
        if action == "combine":
            await coord.merge_or_select("combine", selection=selection())
        else:
            await coord.merge_or_select(action)
        took = (time.perf_counter() - t0) * 1000
        await coord.flush()
        return took

    async def plan_only() -> float:
        coord = await _fork_for_combine(root, paths, backend)
        t0 = time.perf_counter()
        coord.combine_preview(selection())
        took = (time.perf_counter() - t0) * 1000
        await coord.abort_fork()
        return took

    async def run() -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"combine": [], "pick:a": [], "plan": []}
        await one("combine")  # warm-up
        for _ in range(reps):
            out["combine"].append(await one("combine"))
            out["pick:a"].append(await one("pick:a"))
            out["plan"].append(await plan_only())
        return out

    res = asyncio.run(run())
    print(
        f"backend {Workspace(root, backend=backend).fstype}; 2 branches x {len(paths)} "
        f"changed paths; reps {reps}; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores\n"
    )
    print("| measure | p50 ms | min ms | vs pick |")
    print("|---|---:|---:|---:|")
    base = statistics.median(res["pick:a"])
    for name, samples in (
        ("combined merge (50 per file, 50 per hunk)", res["combine"]),
        ("baseline: pick one branch", res["pick:a"]),
        ("of which: the plan alone (combine_preview)", res["plan"]),
    ):
        p50 = statistics.median(samples)
        print(f"| {name} | {p50:.1f} | {min(samples):.1f} | {p50 / base:.2f}x |")
    p50 = statistics.median(res["combine"])
    print(f"\ntarget < 100 ms for 100 paths: {'met' if p50 < 100 else 'NOT met'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--combine", action="store_true", help="time the combined merge instead")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--branches", type=int, default=10)
    ap.add_argument("--changed", type=int, default=100)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument(
        "--backend", default="auto", help="workspace backend for --combine (auto, copy, ...)"
    )
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="forkdeck-bench-review-"))
    os.environ.setdefault("FORKDECK_STORE", str(tmp / "_stores"))
    root = tmp / "project"
    root.mkdir()
    try:
        paths = make_project(root, args.files)
        if args.combine:
            bench_combine(root, paths[: args.changed], args.reps, args.backend)
            return
        changed = paths[: args.changed - 1]  # + the renamed one below = args.changed
        ws = Workspace(root)
        runtimes = []
        for i in range(args.branches):
            b = ws.branch(f"b{i}")
            change_branch(Path(b.path), i, changed, paths[args.changed - 1])
            runtimes.append(SimpleNamespace(branch_id=f"id{i}", label=f"b{i}", ws_branch=b))

        def report() -> Any:
            return build_diff_report("bench", runtimes, parent_path=root)

        def report_and_diffs() -> int:
            r = report()
            return sum(len(c.unified_diff_vs_parent) for p in r.paths for c in p.branches.values())

        sample = report()
        rows = [
            ("report", *timed(report, args.reps)),
            ("report + every diff", *timed(report_and_diffs, args.reps)),
            ("baseline: naive difflib", *timed(lambda: naive(root, runtimes), args.reps)),
        ]
        s = sample.summary
        print(
            f"backend {ws.fstype}; {args.branches} branches x {args.changed} changed files "
            f"(+1 new each) in a {args.files}-file workspace; {len(sample.paths)} paths, "
            f"{s.split_paths} split, {s.renamed_paths} renamed; reps {args.reps}\n"
        )
        print("| measure | p50 ms | min ms | vs naive |")
        print("|---|---:|---:|---:|")
        base = rows[-1][1]
        for name, p50, best in rows:
            print(f"| {name} | {p50:.1f} | {best:.1f} | {p50 / base:.2f}x |")
        target = rows[0][1]
        print(f"\ntarget < 200 ms for the report: {'met' if target < 200 else 'NOT met'}")
        for rt in runtimes:
            rt.ws_branch.abort()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
