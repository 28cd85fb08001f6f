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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--branches", type=int, default=10)
    ap.add_argument("--changed", type=int, default=100)
    ap.add_argument("--files", type=int, default=1000)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="forkdeck-bench-review-"))
    os.environ.setdefault("FORKDECK_STORE", str(tmp / "_stores"))
    root = tmp / "project"
    root.mkdir()
    try:
        paths = make_project(root, args.files)
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
