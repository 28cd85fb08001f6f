"""Every hot path beside the cheapest thing the kernel can do for it, in one run.

Issue 29 asks how close forkdeck is to the machine itself. Each row times a forkdeck hot
path and, in the same process and in alternating rounds (so load from other work on the
machine hits both alike), its *floor*: the minimum the kernel needs to give the same
guarantee. A ratio of 1.0 would mean forkdeck adds nothing over the floor.

Rows (p50 of ``--rounds`` samples, milliseconds of wall time):

* ``isolated_callable``: one pattern candidate run with ``isolate_processes=True``
  (``BestOfN([work], commit=False)``) against the same candidate in-process plus one
  ``fork`` whose child enters new user, mount, pid, ipc and uts namespaces and exits
  (what any isolated run must at least pay).
* ``timeout_callable``: one candidate with ``timeout=`` (killable, so run in a child)
  against the in-process candidate plus a plain ``fork`` + ``_exit`` + ``waitpid``.
* ``sandbox_start``: ``run_command(["/bin/true"], ws)`` against spawning ``/bin/true`` (the
  same command on both sides: a bare ``true`` would add a PATH search to one side only).
* ``sandbox_start_230mb`` and ``isolated_callable_230mb``: the same two rows measured
  afterwards with a caller of about 230 MB (``--caller-mb``: a ballast of touched memory
  held while they run), where every ``fork`` copies that much page table. Issue 29's
  target for both sizes: ``sandbox_start`` at most 1.5 ms over its floor.
* ``commit_100_modified``: ``Branch.commit()`` of a branch that modified 100 files,
  against the journal's minimum for the same guarantee (all-or-nothing under SIGKILL and
  Ctrl-C; forkdeck's journal is the commit point and is the one thing fsynced): with 100
  new files already written into a staging directory on the same filesystem (untimed, as
  the branch's writes are), write and ``fsync`` an intent record naming them (and its
  directory), rename each into place, drop the record.
* ``commit_1000_modified``: the same with 1,000 modified files (a workspace of its own),
  and ``commit_per_file``, derived from the two commit rows: (p50 of 1,000 - p50 of 100)
  / 900, ms per changed file on each side (issue 29's target: <= 0.25 ms for forkdeck).
* ``merge_100_modified``: a fork's ``merge_or_select("pick:...")`` of a branch that
  modified 98 files and created 2 (``benchmarks/fork.py``'s merge, a 1,000-file
  workspace), against the same commit floor for 100 files: what a merge adds to the
  commit (the report, the checkpoint anchors, the fork's settled state) shows as the
  ratio. Issue 29's target is <= 50 ms p50 for forkdeck's side.
* ``ray_task`` (with ``--ray``): one forkdeck candidate on a local one-node Ray cluster
  (``RayRunner``) against a bare Ray task that does the same work (in a temporary
  directory it makes and removes). The candidate's workspace is its own and unchanged
  between rounds, so this is the per-task cost; shipping a changed workspace is paid
  once per change (``benchmarks/cluster.py`` measures it).

    python benchmarks/floors.py [--rounds 40] [--ray] [--json] [--only commit|merge]
                                [--caller-mb 230]

``--json`` prints one object ``{name: {"forkdeck_ms": p50, "floor_ms": p50, "ratio": r}}``
and nothing else on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from branching_core import BestOfN, Workspace  # noqa: E402
from branching_core.sandbox import run_command  # noqa: E402

BIG_COMMIT = 1000  # files of the commit_1000_modified row
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000
NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
_libc = ctypes.CDLL(None, use_errno=True)


def _ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def fork_floor(namespaces: bool) -> None:
    """The kernel's minimum for one isolated (or merely killable) child."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        if namespaces and _libc.unshare(NAMESPACES) != 0:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError(ctypes.get_errno(), "unshare failed in the floor's child")


def work(path: Path) -> tuple[bool, float]:
    (path / "out.txt").write_text("x")
    return True, 1.0


def candidate(ws: Workspace, **options: Any) -> None:
    outcome = BestOfN([work], commit=False, **options)(ws)
    assert outcome.winner is not None, outcome.all_results


def commit_forkdeck(ws: Workspace, round_no: int, files: int = 100) -> float:
    with ws.branch(f"c{round_no + 1}", on_success=None) as b:
        for i in range(files):
            (b.path / "files" / f"f{i}.txt").write_text(f"round {round_no} file {i}\n")
        return _ms(b.commit)


def commit_floor(target: Path, round_no: int, files: int = 100) -> float:
    """Journal (fsynced), rename, forget: what an all-or-nothing commit must do, in ms.

    The staging writes are not timed: on forkdeck's side the branch wrote its files before
    ``commit()`` was called, so the commit itself only publishes them (until issue 29's
    commit work the floor timed the staging too, which flattered the ratio)."""
    stage = target.parent / f".stage-{round_no}"
    stage.mkdir()
    names = [f"f{i}.txt" for i in range(files)]
    for name in names:
        fd = os.open(stage / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, f"round {round_no} file {name}\n".encode())
        finally:
            os.close(fd)
    start = time.perf_counter()
    journal = os.open(stage / "intent", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(journal, "\n".join(names).encode())
    os.fsync(journal)
    os.close(journal)
    dfd = os.open(stage, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)
    for name in names:
        os.rename(stage / name, target / name)
    os.unlink(stage / "intent")
    os.rmdir(stage)
    return (time.perf_counter() - start) * 1e3


class _MergeRow:
    """``merge_100_modified``: one fork merge per call, on one event loop (only
    ``merge_or_select`` is timed; the fork, its run and the branch's writes are not)."""

    def __init__(self, base: Path) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.models.function import FunctionModel

        sys.path.insert(0, str(REPO / "benchmarks"))
        from fork import make_tree, two_writes

        root = base / "merge-ws"
        root.mkdir()
        make_tree(root, 1000)
        self.ws = Workspace(root)
        self.agent = Agent(FunctionModel(two_writes))
        self.existing = sorted(p.relative_to(root) for p in root.glob("d*/f*.txt"))[:98]
        self.loop = asyncio.new_event_loop()

    def __call__(self, round_no: int) -> float:
        return self.loop.run_until_complete(self._merge(round_no))

    async def _merge(self, round_no: int) -> float:
        from branching_core.agent import LocalCommandRunner
        from branching_core.fork import BranchSpec
        from branching_core.live import ForkCoordinator

        coord = ForkCoordinator(self.agent, workspace=self.ws,
                                command_runner=LocalCommandRunner())
        await coord.fork([BranchSpec("m", f"merge{round_no + 1}")], parent_history=[])
        await coord.wait(timeout=60)
        branch_dir = coord.get_branch("m").path
        for rel in self.existing:
            (branch_dir / rel).write_text(f"round {round_no}\n")
        start = time.perf_counter()
        result = await coord.merge_or_select("pick:m")
        elapsed = (time.perf_counter() - start) * 1e3
        assert len(result.applied_paths) == 100 and not result.conflicts, result
        await coord.flush()  # the background record: not the next round's cost
        return elapsed

    def close(self) -> None:
        self.loop.close()


def _tree(root: Path, files: int) -> Path:
    (root / "files").mkdir(parents=True)
    for i in range(files):
        (root / "files" / f"f{i}.txt").write_text(f"original {i}\n")
    return root


Case = tuple[Callable[[int], float], Callable[[int], float]]


def _alternate(cases: dict[str, Case], rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    """Each case's samples, forkdeck side and floor side, warmed once and then in
    ``rounds`` rounds that alternate which side goes first (so neither always runs on a
    warm cache, and load from other work hits both alike)."""
    samples: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in cases}
    for fd_fn, floor_fn in cases.values():  # warm both sides once
        fd_fn(-1)
        floor_fn(-1)
    for r in range(rounds):
        for name, (fd_fn, floor_fn) in cases.items():
            if r % 2:
                samples[name][1].append(floor_fn(r))
                samples[name][0].append(fd_fn(r))
            else:
                samples[name][0].append(fd_fn(r))
                samples[name][1].append(floor_fn(r))
    return samples


def _big_caller(mb: int, rounds: int, ws: Workspace, ws_dir: Path,
                only: str | None) -> dict[str, tuple[list[float], list[float]]]:
    """The sandbox rows again with this process grown by ``mb`` MB of touched memory (a
    caller holding a large model or data set): what a ``fork`` of it costs shows here."""
    cases: dict[str, Case] = {
        "sandbox_start_230mb": (
            lambda r: _ms(lambda: run_command(["/bin/true"], ws_dir)),
            lambda r: _ms(lambda: subprocess.run(["/bin/true"], check=True)),
        ),
        "isolated_callable_230mb": (
            lambda r: _ms(lambda: candidate(ws, isolate_processes=True)),
            lambda r: _ms(lambda: candidate(ws)) + _ms(lambda: fork_floor(True)),
        ),
    }
    if mb != 230:  # the rows say the size they ran at
        cases = {name.replace("230mb", f"{mb}mb"): case for name, case in cases.items()}
    if only:
        cases = {name: case for name, case in cases.items() if only in name}
    if not cases:
        return {}
    ballast = bytearray(mb << 20)
    ballast[::4096] = b"\1" * len(range(0, len(ballast), 4096))  # every page resident
    try:
        return _alternate(cases, rounds)
    finally:
        del ballast


def measure(
    rounds: int, base: Path, with_ray: bool, only: str | None = None, caller_mb: int = 230,
) -> dict[str, dict[str, float]]:
    ws_dir = _tree(base / "ws", 100)
    ws = Workspace(ws_dir)
    floor_dir = base / "floor" / "files"
    floor_dir.mkdir(parents=True)
    # the per-file slope: 1,000 modified files in a workspace of their own (the 100-file
    # row keeps its small workspace), beside the floor's 1,000 renames
    big_ws = Workspace(_tree(base / "ws-1000", BIG_COMMIT))
    big_floor = base / "floor-1000" / "files"
    big_floor.mkdir(parents=True)

    cases: dict[str, Case] = {
        "isolated_callable": (
            lambda r: _ms(lambda: candidate(ws, isolate_processes=True)),
            lambda r: _ms(lambda: candidate(ws)) + _ms(lambda: fork_floor(True)),
        ),
        "timeout_callable": (
            lambda r: _ms(lambda: candidate(ws, timeout=60)),
            lambda r: _ms(lambda: candidate(ws)) + _ms(lambda: fork_floor(False)),
        ),
        "sandbox_start": (
            lambda r: _ms(lambda: run_command(["/bin/true"], ws_dir)),
            lambda r: _ms(lambda: subprocess.run(["/bin/true"], check=True)),
        ),
        "commit_100_modified": (
            lambda r: commit_forkdeck(ws, r),
            lambda r: commit_floor(floor_dir, r),
        ),
        "commit_1000_modified": (
            lambda r: commit_forkdeck(big_ws, r, BIG_COMMIT),
            lambda r: commit_floor(big_floor, r, BIG_COMMIT),
        ),
    }
    merge_floor = base / "floor-merge" / "files"
    merge_floor.mkdir(parents=True)
    merge_row: _MergeRow | None = None
    if not only or only in "merge_100_modified":
        merge_row = _MergeRow(base)
        cases["merge_100_modified"] = (merge_row, lambda r: commit_floor(merge_floor, r))
    if only:
        cases = {name: case for name, case in cases.items() if only in name}
    try:
        samples = _alternate(cases, rounds)
        if caller_mb > 0:
            samples.update(_big_caller(caller_mb, rounds, ws, ws_dir, only))
    finally:
        if merge_row is not None:
            merge_row.close()
    if with_ray and (not only or only in "ray_task"):
        samples.update(_ray_rows(base, rounds))
    out: dict[str, dict[str, float]] = {}
    for name, (fd_s, floor_s) in samples.items():
        # the ratio of the rounded figures it is printed beside (of the unrounded ones it
        # could differ from theirs in the last digit: 31.403 / 1.475 printed as 21.30)
        fd_p50 = round(statistics.median(fd_s), 3)
        floor_p50 = round(statistics.median(floor_s), 3)
        out[name] = {"forkdeck_ms": fd_p50, "floor_ms": floor_p50,
                     "ratio": round(fd_p50 / floor_p50, 2) if floor_p50 else float("inf")}
    if "commit_100_modified" in out and "commit_1000_modified" in out:
        out["commit_per_file"] = _slope(out["commit_100_modified"], out["commit_1000_modified"])
    return out


def _slope(small: dict[str, float], big: dict[str, float]) -> dict[str, float]:
    """ms per changed file: the p50 difference of the 1,000- and 100-file commits over
    the 900 files between them (the fixed cost of a commit falls out)."""
    files = BIG_COMMIT - 100
    fd = round((big["forkdeck_ms"] - small["forkdeck_ms"]) / files, 4)
    floor = round((big["floor_ms"] - small["floor_ms"]) / files, 4)
    return {"forkdeck_ms": fd, "floor_ms": floor,
            "ratio": round(fd / floor, 2) if floor > 0 else float("inf")}


def _ray_rows(base: Path, rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    """The Ray row, measured last on a cluster started for it and shut down after it.

    Started before the local rows (as until this round), the idle cluster's daemons (GCS,
    raylet, dashboard, their polling) ran beside every other row: quiet, the sandbox rows
    measured alone were +1.29/+1.40 ms over their floor (+1.05/+1.27 with the 230 MB
    caller) and +1.49/+1.70 (+1.90/+1.97) beside the idle cluster.

    The candidate's workspace is its own: the commit rows change theirs every round, and
    a changed workspace is a new snapshot to ship and materialise on the node (a cost of
    its own, paid once per change, not per task)."""
    import ray
    from ray.cluster_utils import Cluster

    from branching_core.cluster import RayRunner

    ray_dir = base / "ray-ws"
    (ray_dir / "files").mkdir(parents=True)
    for i in range(100):
        (ray_dir / "files" / f"f{i}.txt").write_text(f"original {i}\n")
    ws = Workspace(ray_dir)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                           "object_store_memory": 100 << 20})
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        runner = RayRunner(max_in_flight=1)

        def bare_work(i: int) -> bool:
            with tempfile.TemporaryDirectory() as d:
                (Path(d) / f"out{i}.txt").write_text("x")
            return True

        bare = ray.remote(max_retries=0)(bare_work)
        return _alternate({
            "ray_task": (
                lambda r: _ms(lambda: candidate(ws, runner=runner)),
                lambda r: _ms(lambda: ray.get(bare.remote(r))),
            )
        }, rounds)
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--ray", action="store_true", help="also measure a candidate on Ray")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--only", help="only the rows whose name contains this (e.g. commit)")
    ap.add_argument("--caller-mb", type=int, default=230,
                    help="the big caller's extra memory for the *_230mb rows (0: skip them)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="forkdeck-floors-") as tmp:
        if args.json:
            with contextlib.redirect_stdout(sys.stderr):
                result = measure(args.rounds, Path(tmp), args.ray, args.only, args.caller_mb)
            print(json.dumps(result))
            return
        result = measure(args.rounds, Path(tmp), args.ray, args.only, args.caller_mb)
    load = os.getloadavg()
    print(f"p50 of {args.rounds} rounds, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'hot path':<24} {'forkdeck ms':>12} {'floor ms':>10} {'ratio':>7} {'over floor':>11}")
    for name, row in result.items():
        print(f"{name:<24} {row['forkdeck_ms']:>12.3f} {row['floor_ms']:>10.3f} "
              f"{row['ratio']:>6.2f}x {row['forkdeck_ms'] - row['floor_ms']:>+8.2f} ms")


if __name__ == "__main__":
    main()
