"""Sibling batches: branch_many(16), commit one, abort_many(15), beside the kernel floor.

Every pattern candidate and every fork branch pays a branch create, and all but one pay
a discard, so these three steps should cost little more than the syscalls they cannot
avoid. Per backend this prints p50/p95 of each step next to the raw floor measured in
the same run (machines here are shared and noisy: compare ratios, not milliseconds):

* overlay floor: in a private mount namespace of a child process, 64 mkdirs (store,
  upper, work, view for 16 branches), 16 overlay mounts with the backend's options,
  16 lazy unmounts (MNT_DETACH);
* copy/reflink floor: per branch 2 mkdirs and a copy (or FICLONE) of every file of
  the workspace (its seed file and the committed ``out.txt``), then 16 renames into a
  trash directory.

With ``--patterns`` it also runs ``benchmarks/patterns.py --overhead-only`` of this tree
and (``--before REV``) of a throwaway worktree at REV, alternately, and prints their
thread-mode 16-candidate overhead side by side, after the batch cycle (branch_many,
commit one, discard fifteen) of both trees, alternating too.

Run: ``python benchmarks/branch_batch.py [--reps 30] [--patterns --before 0bb3c6d]``
(reflink runs on a loop-mounted btrfs when root with mkfs.btrfs; else it is skipped,
saying why).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from branching_core import Workspace  # noqa: E402
from branching_core.errors import MountError  # noqa: E402
from branching_core.workspace import mount_helper, reaper  # noqa: E402
from branching_core.workspace.backends.overlay import _DIR_RENAMES  # noqa: E402

N = 16
STEPS = ("branch_many(16)", "commit one", "abort_many(15)", "whole cycle")

# The overlay floor, run as ``python -c`` in a child that owns a private mount namespace.
_OVERLAY_FLOOR = r"""
import ctypes, json, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0x00020000) == 0, "unshare(CLONE_NEWNS)"
assert libc.mount(b"none", b"/", None, 0x4000 | (1 << 18), None) == 0
base, lower, options, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
out = {"create": [], "umount": [], "create cpu": [], "umount cpu": []}
for rep in range(reps):
    dirs = [f"{base}/{rep}-{i}" for i in range(16)]
    t0, c0 = time.perf_counter(), time.thread_time()
    for d in dirs:
        os.mkdir(d); os.mkdir(d + "/upper"); os.mkdir(d + "/work"); os.mkdir(d + "/view")
    for d in dirs:
        data = f"lowerdir={lower},upperdir={d}/upper,workdir={d}/work,{options},volatile"
        assert libc.mount(b"overlay", (d + "/view").encode(), b"overlay", 0, data.encode()) == 0
    t1, c1 = time.perf_counter(), time.thread_time()
    for d in dirs:
        assert libc.umount2((d + "/view").encode(), 2) == 0
    t2, c2 = time.perf_counter(), time.thread_time()
    out["create"].append(t1 - t0); out["umount"].append(t2 - t1)
    out["create cpu"].append(c1 - c0); out["umount cpu"].append(c2 - c1)
print(json.dumps(out))
"""


# One process of either tree (the ``--before`` one has no abort_many: it aborts one by
# one): cycles of branch_many(16) / a write in each / 20 ms of "work" / commit one /
# discard 15. Prints the p50 wall time without the work, and the CPU (caller thread plus
# mount helper) of the whole cycle, work included (the helper may work meanwhile).
_CYCLE = r"""
import json, statistics, sys, tempfile, time
from pathlib import Path
from branching_core.workspace import Workspace
backend, reps = sys.argv[1], int(sys.argv[2])
root = Path(tempfile.mkdtemp()) / "ws"; root.mkdir(); (root / "seed.txt").write_text("seed")
ws = Workspace(root, backend=backend)
ws.branch("warm-up").abort()
def cpu():
    used = time.thread_time()
    if backend == "overlay":
        from branching_core.workspace.mount_helper import shared_helper
        with open(f"/proc/{shared_helper().pid}/schedstat") as fh:
            used += int(fh.read().split()[0]) / 1e9
    return used
wall, used = [], []
for i in range(reps + 2):
    t0, c0 = time.perf_counter(), cpu()
    kids = ws.branch_many([f"c{i}-{j}" for j in range(16)], on_success=None)
    t1 = time.perf_counter()
    for kid in kids:
        (kid.path / "out.txt").write_text(kid.name)
    time.sleep(0.02)
    t2 = time.perf_counter()
    kids[0].commit()
    if hasattr(ws, "abort_many"):
        ws.abort_many(kids[1:])
    else:
        for kid in kids[1:]:
            kid.abort()
    t3, c3 = time.perf_counter(), cpu()
    if i >= 2:
        wall.append(t3 - t0 - (t2 - t1)); used.append(c3 - c0)
ws.close()
print(json.dumps([statistics.median(wall), statistics.median(used)]))
"""


def cycle_before_after(old: Path, reps: int, rounds: int) -> list[str]:
    """Rows comparing the batch cycle of ``old`` and of this tree, alternating."""
    rows = []
    for backend in ("overlay", "copy"):
        got: dict[str, list[list[float]]] = {"before": [], "after": []}
        for _ in range(rounds):
            for label, tree in (("before", old), ("after", REPO)):
                done = subprocess.run(
                    [sys.executable, "-c", _CYCLE, backend, str(reps)],
                    cwd=tree,
                    env={**os.environ, "PYTHONPATH": str(tree)},
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode == 0:
                    got[label].append(json.loads(done.stdout))
        if not got["before"] or not got["after"]:
            rows.append(f"| {backend} | failed | | |")
            continue
        med = {
            k: [statistics.median(r[i] for r in v) * 1000 for i in (0, 1)] for k, v in got.items()
        }
        rows.append(
            f"| {backend} | {med['before'][0]:.1f} -> **{med['after'][0]:.1f}** ms "
            f"(x{med['before'][0] / med['after'][0]:.1f}) | {med['before'][1]:.1f} -> "
            f"{med['after'][1]:.1f} ms | {rounds} rounds x {reps} cycles |"
        )
    return rows


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def fmt(values: list[float]) -> str:
    return f"{pct(values, 0.5) * 1000:.1f} / {pct(values, 0.95) * 1000:.1f}"


def helper_cpu() -> float:
    """CPU seconds the mount helper has used (its one thread's schedstat, in ns)."""
    try:
        pid = mount_helper.shared_helper().pid
        with open(f"/proc/{pid}/schedstat") as fh:
            return int(fh.read().split()[0]) / 1e9
    except (OSError, ValueError, MountError):
        return 0.0


def bench_batches(root: Path, backend: str, reps: int) -> tuple[dict[str, list[float]], Path]:
    """The three steps, ``reps`` times, on a 1-file workspace under ``root``: wall time
    and CPU time (this thread plus the mount helper; the background reaper excluded)."""
    ws_dir = root / f"ws-{backend}"
    ws_dir.mkdir()
    (ws_dir / "seed.txt").write_text("seed")
    ws = Workspace(ws_dir, backend=backend)
    store_root = ws.tree.store.root
    out: dict[str, list[float]] = {}
    try:
        ws.abort_many(ws.branch_many(["warm-a", "warm-b"], on_success=None))
        for rep in range(reps + 2):
            marks = [(time.perf_counter(), time.thread_time() + helper_cpu())]
            kids = ws.branch_many([f"c{rep}-{i}" for i in range(N)], on_success=None)
            marks.append((time.perf_counter(), time.thread_time() + helper_cpu()))
            for kid in kids:
                (kid.path / "out.txt").write_text(kid.name)
            marks.append((time.perf_counter(), time.thread_time() + helper_cpu()))
            kids[0].commit()
            marks.append((time.perf_counter(), time.thread_time() + helper_cpu()))
            ws.abort_many(kids[1:])
            marks.append((time.perf_counter(), time.thread_time() + helper_cpu()))
            if rep < 2:  # warm-up
                continue
            # whole cycle: all of it, with the 16 small writes and whatever the mount helper
            # does after a reply (spares for the next batch)
            for step, (i, j) in zip(STEPS, ((0, 1), (2, 3), (3, 4), (0, 4)), strict=True):
                out.setdefault(step, []).append(marks[j][0] - marks[i][0])
                out.setdefault(step + " cpu", []).append(marks[j][1] - marks[i][1])
    finally:
        ws.close()
        reaper.drain(30)
    return out, store_root


def overlay_floor(store: Path, lower: Path, reps: int, redirect: bool) -> dict[str, list[float]]:
    """In the branch store's own directory: what a directory operation costs depends on
    where it happens (on this machine a mkdir under ~/.cache took 8-13x one in /tmp)."""
    base = Path(tempfile.mkdtemp(dir=store, prefix=".floor-"))
    options = "redirect_dir=on" if redirect else "userxattr"
    done = subprocess.run(
        [sys.executable, "-c", _OVERLAY_FLOOR, str(base), str(lower), options, str(reps)],
        capture_output=True,
        text=True,
        check=True,
    )
    shutil.rmtree(base, ignore_errors=True)
    raw: dict[str, list[float]] = json.loads(done.stdout)
    return raw


def copy_floor(root: Path, store: Path, reps: int, clone: bool) -> dict[str, list[float]]:
    from branching_core.workspace.backends.reflink import clone_file

    # the same files as the benchmarked workspace holds: its seed and the committed out.txt
    sources = []
    for name, text in (("seed.txt", "seed"), ("out.txt", "c0-0")):
        sources.append(root / f"floor-{name}")
        sources[-1].write_text(text)
    base = Path(tempfile.mkdtemp(dir=store, prefix=".floor-"))  # as for overlay_floor
    trash = base / "trash"
    trash.mkdir()
    out: dict[str, list[float]] = {"create": [], "umount": [], "create cpu": [], "umount cpu": []}
    for rep in range(reps):
        dirs = [f"{base}/{rep}-{i}" for i in range(N)]
        t0, c0 = time.perf_counter(), time.thread_time()
        for d in dirs:
            os.mkdir(d)
            os.mkdir(d + "/view")
            for source in sources:
                target = f"{d}/view/{source.name[6:]}"
                if clone:
                    clone_file(str(source), target)
                else:
                    shutil.copy2(source, target)
        t1, c1 = time.perf_counter(), time.thread_time()
        for i, d in enumerate(dirs):
            os.rename(d, f"{trash}/{rep}-{i}")
        t2, c2 = time.perf_counter(), time.thread_time()
        out["create"].append(t1 - t0)
        out["umount"].append(t2 - t1)
        out["create cpu"].append(c1 - c0)
        out["umount cpu"].append(c2 - c1)
    shutil.rmtree(base, ignore_errors=True)
    return out


@contextmanager
def btrfs_root() -> Iterator[Path | None]:
    """A loop-mounted btrfs (what the tests use for reflink), or None."""
    if os.geteuid() != 0 or shutil.which("mkfs.btrfs") is None:
        yield None
        return
    base = Path(tempfile.mkdtemp(prefix="forkdeck-bench-btrfs-"))
    image, mnt = base / "fs.img", base / "mnt"
    mnt.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(300 * 1024 * 1024)
    ok = subprocess.run(["mkfs.btrfs", "-q", "-f", str(image)], capture_output=True).returncode == 0
    ok = ok and subprocess.run(["mount", "-o", "loop", str(image), str(mnt)]).returncode == 0
    try:
        yield mnt if ok else None
    finally:
        if ok:
            subprocess.run(["umount", "-l", str(mnt)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def patterns_thread_overhead(tree: Path, runs: int) -> tuple[str, str]:
    """(thread-mode row, CPU note) of ``benchmarks/patterns.py --overhead-only`` of ``tree``."""
    done = subprocess.run(
        [sys.executable, "benchmarks/patterns.py", "--overhead-only", "--runs", str(runs)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    for line in done.stdout.splitlines():
        if "thread (no timeout)" in line:
            cells = [c.strip() for c in line.strip("|").split("|")]
            cpu = re.search(r"CPU per call[^|]*", cells[2])
            return cells[1], cpu.group(0) if cpu else ""
    return "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1], ""


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--patterns", action="store_true", help="also the patterns.py figure")
    ap.add_argument("--before", help="a git revision to compare patterns.py against")
    ap.add_argument("--pattern-runs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2, help="alternating patterns.py rounds")
    args = ap.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; cpus: {os.cpu_count()}")
    scratch = Path(tempfile.mkdtemp(prefix="forkdeck-branch-batch-"))
    rows: list[tuple[str, ...]] = []
    try:
        with btrfs_root() as btrfs:
            for backend in ("overlay", "reflink", "copy"):
                root = scratch
                if backend == "reflink":
                    if btrfs is None:
                        print("reflink: skipped (needs root and mkfs.btrfs for a loop btrfs)")
                        continue
                    root = Path(tempfile.mkdtemp(dir=btrfs))
                    os.environ["FORKDECK_STORE"] = str(root / "_stores")
                steps, store = bench_batches(root, backend, args.reps)
                os.environ.pop("FORKDECK_STORE", None)
                if backend == "overlay":
                    redirect = any(on for on, _ in _DIR_RENAMES.values())
                    floor = overlay_floor(store, root / "ws-overlay", args.reps, redirect)
                    notes = ("64 mkdir + 16 overlay mounts", "16 umount(MNT_DETACH)")
                else:
                    floor = copy_floor(root, store, args.reps, clone=backend == "reflink")
                    notes = ("16x (2 mkdir + copy the 2 files)", "16 renames")
                floor["cycle"] = [
                    a + b for a, b in zip(floor["create"], floor["umount"], strict=True)
                ]
                floor["cycle cpu"] = [
                    a + b for a, b in zip(floor["create cpu"], floor["umount cpu"], strict=True)
                ]
                for step, kind, note in (
                    ("branch_many(16)", "create", notes[0]),
                    ("commit one", "", ""),
                    ("abort_many(15)", "umount", notes[1]),
                    ("whole cycle", "cycle", "both floors (no commit in them)"),
                ):
                    wall, cpu = steps[step], steps[step + " cpu"]
                    cells = [backend, step, fmt(wall), f"{pct(cpu, 0.5) * 1000:.1f}"]
                    if kind:
                        fw, fc = floor[kind], floor[kind + " cpu"]
                        extra = (pct(cpu, 0.5) - pct(fc, 0.5)) * 1000
                        cells.append(
                            f"{note}: {fmt(fw)} wall, {pct(fc, 0.5) * 1000:.1f} CPU; "
                            f"CPU beyond the floor +{extra:.1f} ms "
                            f"(x{pct(cpu, 0.5) / max(pct(fc, 0.5), 1e-9):.1f})"
                        )
                    else:
                        cells.append("")
                    rows.append(tuple(cells))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        "\n| backend | step | wall p50 / p95 ms | CPU p50 ms (caller + mount helper) "
        "| kernel floor, same run (p50 / p95 wall, p50 CPU) |\n|---|---|---|---|---|"
    )
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.patterns:
        trees = [("this tree", REPO)]
        old: Path | None = None
        if args.before:
            old = Path(tempfile.mkdtemp(prefix="forkdeck-before-")) / "tree"
            subprocess.run(
                ["git", "worktree", "add", "-q", "--detach", str(old), args.before],
                cwd=REPO,
                check=True,
            )
            trees.insert(0, (f"before ({args.before})", old))
        try:
            if old is not None:
                print(
                    "\n| batch cycle, before -> after | wall p50 (without the work) "
                    "| CPU p50 (caller + helper, whole cycle) | |\n|---|---|---|---|"
                )
                for row in cycle_before_after(old, args.reps, args.rounds):
                    print(row, flush=True)
            print("\n| patterns.py --overhead-only, 16 candidates, thread | p50 / p95 | |")
            print("|---|---|---|")
            for round_ in range(args.rounds):
                for label, tree in trees:
                    measured, cpu = patterns_thread_overhead(tree, args.pattern_runs)
                    print(f"| {label}, round {round_ + 1} | {measured} | {cpu} |", flush=True)
        finally:
            if old is not None:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(old)], cwd=REPO, check=False
                )
    print(f"\nload after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
