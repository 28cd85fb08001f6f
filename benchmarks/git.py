"""Git in branches at scale (issue 25): build a repository of N tracked files, then print
the best-of-R branch create time (next to a one-file workspace's), ``git status`` in a
sandbox of the parent and of a branch, and a landing commit of one file.

Run: ``python benchmarks/git.py [--files 100000] [--reps 5]`` (root or unprivileged; the
overlay backend when available). Machines here are shared: compare ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branching_core.gitops import commit_paths
from branching_core.sandbox import run_command
from branching_core.workspace import Workspace
from tests.git.bigrepo import TIMED_STATUS, build_repo


def best(fn, reps: int) -> float:
    out = []
    for _ in range(reps):
        out.append(fn())
    return min(out)


def create_s(ws: Workspace) -> float:
    t = time.perf_counter()
    b = ws.branch(f"b{time.perf_counter_ns()}", on_success=None)
    d = time.perf_counter() - t
    b.abort()
    return d


def status_s(path: Path) -> float:
    r = run_command(TIMED_STATUS, path)
    assert r.exit_code == 0, r.stderr
    return int(r.stdout.strip()) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("FORKDECK_STORE", str(Path(tmp) / "store"))
        t = time.perf_counter()
        repo = build_repo(Path(tmp) / "repo", args.files)
        built = time.perf_counter() - t
        small = Path(tmp) / "small"
        small.mkdir()
        (small / "a").write_text("a\n")
        ws, small_ws = Workspace(repo), Workspace(small)
        big_c, small_c = best(lambda: create_s(ws), args.reps), best(lambda: create_s(small_ws), args.reps)
        parent = best(lambda: status_s(repo), args.reps)
        b = ws.branch("status", on_success=None)
        branch = best(lambda: status_s(b.path), args.reps)
        b.abort()
        (repo / "d000" / "f000000.txt").write_text("landed\n")
        t = time.perf_counter()
        res = commit_paths(repo, ["d000/f000000.txt"], "land one file")
        commit = time.perf_counter() - t
        assert res.commit, res.note
        load = os.getloadavg()
        print(f"files={args.files} backend={ws.fstype} reps={args.reps} "
              f"load={load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print("| measure | seconds |\n|---|---|")
        print(f"| build repo (fast-import + checkout) | {built:.2f} |")
        print(f"| branch create, {args.files} files | {big_c * 1000:.2f} ms |")
        print(f"| branch create, 1 file | {small_c * 1000:.2f} ms |")
        print(f"| git status in a sandbox of the parent | {parent:.3f} |")
        print(f"| git status in a sandbox of a branch | {branch:.3f} (x{branch / parent:.2f}) |")
        print(f"| landing commit of 1 path (temporary index from HEAD) | {commit:.3f} |")
        subprocess.run(["git", "-C", str(repo), "fsck", "--no-progress", "--connectivity-only"],
                       check=True)


if __name__ == "__main__":
    main()
