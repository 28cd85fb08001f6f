"""Branch create / write 10 files / commit / abort, per backend, against copytree and git worktree.

Run: ``python benchmarks/workspace.py [--sizes 1000,10000,100000] [--reps 20]``.
Prints a markdown table of p50/p95 in milliseconds, with each backend's create and
abort as a ratio to the baselines measured in the same run (machines here are noisy),
then the 100 MB commit figure and a 1,000-cycle leak check.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branching_core import Workspace
from branching_core.workspace.backends import BACKENDS
from branching_core.workspace.mount_helper import shared_helper

PHASES = ("create", "write10", "commit", "abort")


def make_tree(root: Path, files: int) -> None:
    per_dir = 100
    for i in range(files):
        d = root / f"d{i // per_dir:04d}"
        if i % per_dir == 0:
            d.mkdir(parents=True)
        (d / f"f{i % per_dir:03d}.txt").write_text(f"file {i}\n")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def write10(path: Path, rep: int) -> None:
    for j in range(10):
        (path / f"d{j:04d}" / f"f{j:03d}.txt").write_text(f"changed {rep}\n")


def bench_backend(ws_dir: Path, backend: str, reps: int) -> dict[str, list[float]]:
    ws = Workspace(ws_dir, backend=backend)
    out: dict[str, list[float]] = {p: [] for p in PHASES}
    for rep in range(reps):
        holder: dict[str, object] = {}
        out["create"].append(timed(lambda: holder.__setitem__("b", ws.branch(f"c{rep}"))))
        b = holder["b"]
        out["write10"].append(timed(lambda: write10(b.path, rep)))  # type: ignore[attr-defined]
        out["commit"].append(timed(b.commit))  # type: ignore[attr-defined]
        a = ws.branch(f"a{rep}")
        write10(a.path, rep)
        out["abort"].append(timed(a.abort))
    return out


def bench_copytree(ws_dir: Path, scratch: Path, reps: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {p: [] for p in PHASES}
    for rep in range(reps):
        dst = scratch / f"copy{rep}"
        out["create"].append(timed(lambda: shutil.copytree(ws_dir, dst, symlinks=True)))
        out["write10"].append(timed(lambda: write10(dst, rep)))

        def copy_back() -> None:
            for j in range(10):
                rel = Path(f"d{j:04d}") / f"f{j:03d}.txt"
                shutil.copy2(dst / rel, ws_dir / rel)

        out["commit"].append(timed(copy_back))
        out["abort"].append(timed(lambda: shutil.rmtree(dst)))
    return out


def bench_git_worktree(ws_dir: Path, scratch: Path, reps: int) -> dict[str, list[float]]:
    repo = scratch / "gitrepo"
    shutil.copytree(ws_dir, repo, symlinks=True)
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b", "-c", "gc.auto=0"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "-m", "base"], check=True)
    out: dict[str, list[float]] = {p: [] for p in PHASES}
    for rep in range(reps):
        wt = scratch / f"wt{rep}"
        out["create"].append(
            timed(
                lambda: subprocess.run(
                    [*git, "-C", str(repo), "worktree", "add", "-q", "--detach", str(wt)],
                    check=True,
                )
            )
        )
        out["write10"].append(timed(lambda: write10(wt, rep)))
        out["commit"].append(
            timed(
                lambda: subprocess.run(
                    f"git -C {wt} add -A && git -c user.name=b -c user.email=b@b -C {wt} commit -q --allow-empty -m x",
                    shell=True,
                    check=True,
                )
            )
        )
        out["abort"].append(
            timed(
                lambda: subprocess.run(
                    [*git, "-C", str(repo), "worktree", "remove", "--force", str(wt)], check=True
                )
            )
        )
    return out


def dir_rename_modes(sizes: list[int], base: Path, reps: int) -> list[str]:
    """Overlay create p50 with redirect_dir=on (root: directory renames work) against the
    userxattr format (unprivileged: they fail with EXDEV), same trees, same run; and the
    cost of committing a renamed directory of 100 files (published from a merge)."""
    lines = []
    for size in sizes:
        ws = Workspace(base / f"tree{size}", backend="overlay")
        if not ws.dir_renames:
            return [f"directory renames unavailable: {ws.dir_renames_why}"]
        modes: dict[bool, list[float]] = {True: [], False: []}
        for rep in range(reps):
            for mode in (True, False):
                ws.tree.backend.dir_renames = mode
                holder: dict[str, object] = {}
                modes[mode].append(timed(lambda: holder.update(b=ws.branch(f"m{rep}{mode}"))))
                holder["b"].abort()  # type: ignore[attr-defined]
        ws.tree.backend.dir_renames = True
        on, off = pct(modes[True], 0.5), pct(modes[False], 0.5)
        lines.append(
            f"overlay create p50 at {size:,} files: redirect_dir=on {on:.2f} ms, "
            f"userxattr {off:.2f} ms ({on / off:.2f}x)"
        )
        rename_commit = []
        for rep in range(min(reps, 5)):
            b = ws.branch(f"mv{rep}")
            os.rename(b.path / "d0000", b.path / f"moved{rep}")
            rename_commit.append(timed(b.commit))
            os.rename(ws.path / f"moved{rep}", ws.path / "d0000")
        lines.append(
            f"  commit of a renamed 100-file directory: p50 {statistics.median(rename_commit):.2f} ms"
        )
    return lines


def big_file_commit(scratch: Path, reps: int = 5) -> list[float]:
    ws_dir = scratch / "bigws"
    ws_dir.mkdir()
    ws = Workspace(ws_dir, backend="overlay")
    payload = os.urandom(1024 * 1024)
    times = []
    for rep in range(reps):
        b = ws.branch(f"big{rep}")
        with open(b.path / f"model{rep}.bin", "wb") as fh:
            for _ in range(100):
                fh.write(payload)
        times.append(timed(b.commit))
    return times


def leak_check(scratch: Path, cycles: int = 1000) -> str:
    ws_dir = scratch / "leakws"
    ws_dir.mkdir()
    make_tree(ws_dir, 1000)
    ws = Workspace(ws_dir, backend="overlay")
    ws.branch("warm").abort()
    fds = len(os.listdir("/proc/self/fd"))
    for i in range(cycles):
        b = ws.branch(f"l{i}")
        (b.path / "x.txt").write_text(str(i))
        b.abort()
    with open(f"/proc/{shared_helper().pid}/mountinfo") as fh:
        mounts = sum(1 for line in fh if str(ws.tree.store.root) in line)
    dirs = len(ws.tree.store.branch_ids())
    fd_delta = len(os.listdir("/proc/self/fd")) - fds
    return f"{cycles} create/write/abort cycles: leaked mounts={mounts}, store dirs={dirs}, fds={fd_delta}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--backends", default="overlay,copy")
    parser.add_argument(
        "--slow-reps",
        type=int,
        default=5,
        help="repetitions for full-copy methods (copy backend, copytree, git worktree) "
        "at 100,000 files or more, where each one takes tens of seconds",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = [b for b in args.backends.split(",") if b in BACKENDS]
    base = Path(tempfile.mkdtemp(prefix="forkdeck-bench-", dir=os.environ.get("BENCH_DIR")))
    os.environ.setdefault("FORKDECK_STORE", str(base / "stores"))
    rows: list[tuple[int, str, dict[str, list[float]]]] = []
    try:
        for size in sizes:
            ws_dir = base / f"tree{size}"
            ws_dir.mkdir()
            make_tree(ws_dir, size)
            slow_reps = args.slow_reps if size >= 100_000 else args.reps
            for name in backends:
                if BACKENDS[name].probe(ws_dir, base / "stores" / "probe") is None:
                    reps = args.reps if name == "overlay" else slow_reps
                    rows.append((size, name, bench_backend(ws_dir, name, reps)))
                    print(f"  measured {name} at {size}", file=sys.stderr)
            scratch = base / f"scratch{size}"
            scratch.mkdir()
            rows.append((size, "shutil.copytree", bench_copytree(ws_dir, scratch, slow_reps)))
            rows.append((size, "git worktree add", bench_git_worktree(ws_dir, scratch, slow_reps)))
            print(f"  measured baselines at {size}", file=sys.stderr)
            shutil.rmtree(scratch)
        print(
            f"| files | method | {' | '.join(f'{p} p50 / p95 ms' for p in PHASES)} "
            "| create vs copytree | create vs worktree |"
        )
        print("|---|---|" + "---|" * (len(PHASES) + 2))
        for size, name, data in rows:
            base_copy = next(d for s, n, d in rows if s == size and n == "shutil.copytree")
            base_git = next(d for s, n, d in rows if s == size and n == "git worktree add")
            cells = " | ".join(
                f"{pct(data[p], 0.5):.2f} / {pct(data[p], 0.95):.2f}" for p in PHASES
            )
            c50 = pct(data["create"], 0.5)
            print(
                f"| {size:,} | {name} | {cells} | {pct(base_copy['create'], 0.5) / c50:.0f}x faster "
                f"| {pct(base_git['create'], 0.5) / c50:.0f}x faster |"
            )
        overlay = {s: d for s, n, d in rows if n == "overlay"}
        if overlay:
            small, large = min(overlay), max(overlay)
            ratio = pct(overlay[large]["create"], 0.5) / pct(overlay[small]["create"], 0.5)
            print(f"\noverlay create p50 at {large:,} files / at {small:,} files: {ratio:.2f}x")
            big = big_file_commit(base)
            print(
                f"overlay commit of one new 100 MB file: p50 {statistics.median(big):.2f} ms "
                f"(max {max(big):.2f} ms over {len(big)})"
            )
            print(leak_check(base))
            for line in dir_rename_modes(sorted(overlay), base, args.reps):
                print(line)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
