"""Live-run-forking figures, copy-on-write workspace vs a full-copy branch (one run).

Targets from the issue (FunctionModel, 2 tool calls per branch):

* ``fork()`` of 10 branches, including their workspace branches: p50 < 20 ms
* all 10 branches done (fork() to the last branch finished):      < 300 ms
* merge of a branch with 100 changed files:                       < 50 ms
* one ``run_command`` in a branch of a 10,000-file workspace, end to end
  (fork() of one branch to its command's result back in the branch): < 100 ms
  (pydantic-deep: about 16 s, it copies the tree for every command)

Each figure is measured on the automatic backend (overlay here) and on ``backend="copy"``
(a full copy per branch). Prints a markdown table.

    /work/venv/bin/python benchmarks/fork.py [--reps 10] [--files 1000] [--big 10000]

``--only modified`` runs just the modified-files merges and their event-loop stalls
(issue 12 item 10), on both backends, with the machine's load average.

``--only peer`` is the side-by-side with pydantic-deep (issue 29): the merge of a branch
that modified 98 files and created 2 in a ``--peer-files`` workspace (10,000 by default),
forkdeck's ``merge_or_select("pick:...")`` against pydantic-deep's, rounds alternating in
one process, each with its own copy of the tree. pydantic-deep is a benchmark-only
dependency, not in any extra: ``pip install pydantic-deep`` (0.3.50 was measured); without
it its column says so and forkdeck's side still runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from branching_core.agent import LocalCommandRunner, SandboxCommandRunner
from branching_core.fork import BranchSpec
from branching_core.live import ForkCoordinator
from branching_core.sandbox import sandbox_available
from branching_core.workspace import Workspace


def _steer(messages: list[ModelMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if p.part_kind == "user-prompt" and isinstance(p.content, str):
                    return p.content
    return ""


def _returns(messages: list[ModelMessage]) -> int:
    return sum(
        1
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if p.part_kind == "tool-return"
    )


def two_writes(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    label, n = _steer(messages), _returns(messages)
    if n < 2:
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": f"{label}-{n}.txt", "content": label})]
        )
    return ModelResponse(parts=[TextPart("done")])


def one_command(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if _returns(messages) < 1:
        return ModelResponse(
            parts=[ToolCallPart("run_command", {"command": "ls | wc -l > count.txt"})]
        )
    return ModelResponse(parts=[TextPart("done")])


def make_tree(root: Path, files: int) -> None:
    per_dir = 100
    for i in range(files):
        d = root / f"d{i // per_dir:04d}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.txt").write_text(f"file {i}\n")


def pct(samples: list[float], q: int) -> float:
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


async def bench_fork(ws: Workspace, reps: int) -> tuple[list[float], list[float]]:
    agent = Agent(FunctionModel(two_writes))
    fork_ms, done_ms = [], []
    specs = [BranchSpec(f"b{i}", f"b{i}") for i in range(10)]
    for rep in range(reps + 1):
        coord = ForkCoordinator(agent, workspace=ws, command_runner=LocalCommandRunner())
        t0 = time.perf_counter()
        await coord.fork(specs, parent_history=[])
        t1 = time.perf_counter()
        statuses = await coord.wait(timeout=60)
        t2 = time.perf_counter()
        assert all(s.state == "done" for s in statuses), statuses
        if rep:  # first round is warm-up
            fork_ms.append((t1 - t0) * 1000)
            done_ms.append((t2 - t0) * 1000)
        await coord.abort_fork()
    return fork_ms, done_ms


def bench_bare_branches(ws: Workspace, reps: int) -> list[float]:
    """10 durable workspace branches alone: the workspace layer's share of fork()."""
    samples = []
    for rep in range(reps + 1):
        t0 = time.perf_counter()
        branches = [
            ws.branch(f"bare{rep}-{i}", on_success=None, on_error=None, durable=True)
            for i in range(10)
        ]
        elapsed = (time.perf_counter() - t0) * 1000
        for b in branches:
            b.abort()
        if rep:
            samples.append(elapsed)
    return samples


async def bench_merge(ws: Workspace, reps: int) -> list[float]:
    agent = Agent(FunctionModel(two_writes))
    samples = []
    for rep in range(reps + 1):
        coord = ForkCoordinator(agent, workspace=ws, command_runner=LocalCommandRunner())
        await coord.fork(
            [BranchSpec("m", f"m{rep}"), BranchSpec("other", "other")], parent_history=[]
        )
        await coord.wait(timeout=60)
        branch_dir = coord.get_branch("m").path
        (branch_dir / f"merged{rep}").mkdir()
        for i in range(98):  # + the 2 files the model wrote = 100 changed files
            (branch_dir / f"merged{rep}" / f"f{i}.txt").write_text(f"changed {i}\n")
        t0 = time.perf_counter()
        result = await coord.merge_or_select("pick:m")
        elapsed = (time.perf_counter() - t0) * 1000
        assert len(result.applied_paths) == 100 and not result.conflicts and not result.errors, (
            result
        )
        if rep:
            samples.append(elapsed)
    return samples


class StallProbe:
    """A ticker task that sleeps 1 ms at a time and records its worst lateness (ms): how
    long the event loop was blocked (what freezes a TUI) while the probe ran."""

    def __init__(self) -> None:
        self.worst_ms = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            self.worst_ms = max(self.worst_ms, (time.perf_counter() - t0 - 0.001) * 1000)

    async def __aenter__(self) -> StallProbe:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        await asyncio.sleep(0.002)  # let it start
        self.worst_ms = 0.0
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def bench_merge_modified(
    ws: Workspace, reps: int, big_mb: int, cpu_ms: list[float] | None = None
) -> tuple[list[float], list[float], list[float], list[float], list[float]]:
    """Merge of 98 modified existing files + 2 new ones, and of one modified ``big_mb`` MB
    file: merge ms and the worst event-loop stall (ms) during each merge, and the worst
    stall of an idle loop over the same time (the noise floor of a shared machine).

    ``cpu_ms`` (when given) collects the CPU time this process (all its threads, not its
    children) spent during each 100-file merge: the work that competes with the event
    loop for the GIL, a figure the machine's load does not move much."""
    agent = Agent(FunctionModel(two_writes))
    root = Path(ws.path)
    existing = sorted(p.relative_to(root) for p in root.glob("d*/f*.txt"))[:98]
    big = root / "big.bin"
    if not big.exists():
        with big.open("wb") as fh:
            for _ in range(big_mb):
                fh.write(os.urandom(1 << 20))
    merge_ms, stall_ms, big_ms, big_stall_ms, idle_stall_ms = [], [], [], [], []
    for rep in range(reps + 1):
        coord = ForkCoordinator(agent, workspace=ws, command_runner=LocalCommandRunner())
        await coord.fork([BranchSpec("m", f"mod{rep}")], parent_history=[])
        await coord.wait(timeout=60)
        branch_dir = coord.get_branch("m").path
        for rel in existing:
            (branch_dir / rel).write_text(f"modified {rep}\n")
        async with StallProbe() as probe:
            t0, c0 = time.perf_counter(), time.process_time()
            result = await coord.merge_or_select("pick:m")
            elapsed = (time.perf_counter() - t0) * 1000
            cpu = (time.process_time() - c0) * 1000
        assert len(result.applied_paths) == 100 and not result.conflicts, result
        await coord.flush()
        if rep:
            merge_ms.append(elapsed)
            stall_ms.append(probe.worst_ms)
            if cpu_ms is not None:
                cpu_ms.append(cpu)

        coord = ForkCoordinator(agent, workspace=ws, command_runner=LocalCommandRunner())
        await coord.fork([BranchSpec("m", f"big{rep}")], parent_history=[])
        await coord.wait(timeout=60)
        with (coord.get_branch("m").path / "big.bin").open("r+b") as fh:
            fh.write(f"rep {rep}".encode())  # a modification: the whole file is copied up
        async with StallProbe() as probe:
            t0 = time.perf_counter()
            result = await coord.merge_or_select("pick:m")
            elapsed = (time.perf_counter() - t0) * 1000
            await coord.flush()  # the post-fork record of the big file runs meanwhile
        assert "big.bin" in result.applied_paths and not result.conflicts, result
        async with StallProbe() as idle:  # the machine's own noise, nothing running
            await asyncio.sleep(elapsed / 1000)
        if rep:
            big_ms.append(elapsed)
            big_stall_ms.append(probe.worst_ms)
            idle_stall_ms.append(idle.worst_ms)
    return merge_ms, stall_ms, big_ms, big_stall_ms, idle_stall_ms


async def bench_command(ws: Workspace, reps: int, runner: object) -> list[float]:
    agent = Agent(FunctionModel(one_command))
    samples = []
    for rep in range(reps + 1):
        coord = ForkCoordinator(agent, workspace=ws, command_runner=runner)
        t0 = time.perf_counter()
        await coord.fork([BranchSpec("c", "count")], parent_history=[])
        await coord.wait(timeout=60)
        elapsed = (time.perf_counter() - t0) * 1000
        rt = coord.get_branch("c")
        assert rt.state == "done" and (rt.path / "count.txt").exists(), rt.status()
        if rep:
            samples.append(elapsed)
        await coord.abort_fork()
    return samples


def fmt(samples: list[float]) -> str:
    return f"{pct(samples, 50):.1f} / {pct(samples, 95):.1f}"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument(
        "--files", type=int, default=1000, help="workspace size for fork/merge figures"
    )
    parser.add_argument(
        "--big", type=int, default=10000, help="workspace size for the run_command figure"
    )
    parser.add_argument("--big-mb", type=int, default=100, help="size of the one big file")
    parser.add_argument(
        "--only",
        choices=["all", "modified", "peer"],
        default="all",
        help="'modified': only the modified-files merges and their loop stalls; "
        "'peer': the merge beside pydantic-deep's",
    )
    parser.add_argument(
        "--peer-files", type=int, default=10000, help="workspace size for --only peer"
    )

    args = parser.parse_args()
    if args.only == "modified":
        await main_modified(args)
        return
    if args.only == "peer":
        from peer_merge import main_peer  # benchmarks/peer_merge.py

        await main_peer(args.peer_files, args.reps)
        return
    tmp = Path(tempfile.mkdtemp(prefix="forkbench-"))
    os.environ.setdefault("FORKDECK_STORE", str(tmp / "_stores"))
    runner = SandboxCommandRunner() if sandbox_available()[0] else LocalCommandRunner()
    rows: dict[str, dict[str, str]] = {}
    backends = {}
    try:
        for backend in ("auto", "copy"):
            small, big = tmp / f"{backend}-small", tmp / f"{backend}-big"
            small.mkdir()
            big.mkdir()
            make_tree(small, args.files)
            make_tree(big, args.big)
            ws_small, ws_big = Workspace(small, backend=backend), Workspace(big, backend=backend)
            backends[backend] = ws_small.fstype
            fork_ms, done_ms = await bench_fork(ws_small, args.reps)
            bare_ms = bench_bare_branches(ws_small, args.reps)
            merge_ms = await bench_merge(ws_small, args.reps)
            mod_ms, mod_stall, big_ms, big_stall, idle_stall = await bench_merge_modified(
                ws_small, max(3, args.reps // 2), args.big_mb
            )
            cmd_ms = await bench_command(ws_big, max(3, args.reps // 2), runner)
            rows[backend] = {
                "fork": fmt(fork_ms),
                "done": fmt(done_ms),
                "bare": fmt(bare_ms),
                "merge": fmt(merge_ms),
                "mod": fmt(mod_ms),
                "mod_stall": fmt(mod_stall),
                "big": fmt(big_ms),
                "big_stall": fmt(big_stall),
                "idle_stall": fmt(idle_stall),
                "_p50m": f"{pct(mod_ms, 50)},{max(mod_stall)},{max(big_stall)}",
                "cmd": fmt(cmd_ms),
                "_p50": f"{pct(fork_ms, 50)},{pct(done_ms, 50)},{pct(merge_ms, 50)},{pct(cmd_ms, 50)}",
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    a, c = rows["auto"], rows["copy"]
    p50 = [float(x) for x in a["_p50"].split(",")]
    targets = [20, 300, 50, 100]
    ok = ["yes" if v < t else "NO" for v, t in zip(p50, targets, strict=True)]
    print(
        f"\nLive run forking, one run (p50 / p95 ms; {args.reps} reps; runner: {type(runner).__name__})\n"
    )
    print(f"| figure | target | CoW ({backends['auto']}) | met | full copy ({backends['copy']}) |")
    print("|---|---|---|---|---|")
    print(
        f"| fork() 10 branches, {args.files}-file workspace | < 20 ms | {a['fork']} | {ok[0]} | {c['fork']} |"
    )
    print(f"| (of which: 10 bare durable workspace branches) | | {a['bare']} | | {c['bare']} |")
    print(
        f"| fork() to all 10 done (2 tool calls each) | < 300 ms | {a['done']} | {ok[1]} | {c['done']} |"
    )
    print(f"| merge, 100 changed files | < 50 ms | {a['merge']} | {ok[2]} | {c['merge']} |")
    print(
        f"| one run_command in a branch, {args.big}-file workspace, end to end | < 100 ms | {a['cmd']} | {ok[3]} | {c['cmd']} |"
    )
    m = [float(x) for x in a["_p50m"].split(",")]
    okm = ["yes" if v <= t else "NO" for v, t in zip(m, [50, 20, 20], strict=True)]
    print(f"| merge, 98 modified + 2 new files | <= 50 ms | {a['mod']} | {okm[0]} | {c['mod']} |")
    print(
        f"| worst event-loop stall during that merge | <= 20 ms (max) | {a['mod_stall']} | {okm[1]} | {c['mod_stall']} |"
    )
    print(f"| merge, one modified {args.big_mb} MB file | | {a['big']} | | {c['big']} |")
    print(
        f"| worst event-loop stall during that merge (+ post-fork record) | <= 20 ms (max) | {a['big_stall']} | {okm[2]} | {c['big_stall']} |"
    )
    print(
        f"| (worst stall of an idle loop, same duration: noise) | | {a['idle_stall']} | | {c['idle_stall']} |"
    )


async def main_modified(args: argparse.Namespace) -> None:
    """The modified-files merges alone, both backends in one run (``--only modified``)."""
    tmp = Path(tempfile.mkdtemp(prefix="forkbench-"))
    os.environ.setdefault("FORKDECK_STORE", str(tmp / "_stores"))
    rows: dict[str, list[list[float]]] = {}
    names: dict[str, str] = {}
    load = os.getloadavg()[0]
    try:
        for backend in ("auto", "copy"):
            small = tmp / f"{backend}-small"
            small.mkdir()
            make_tree(small, args.files)
            ws = Workspace(small, backend=backend)
            names[backend] = ws.fstype
            cpu: list[float] = []
            rows[backend] = [*await bench_merge_modified(ws, args.reps, args.big_mb, cpu), cpu]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = max(load, os.getloadavg()[0])
    a, c = rows["auto"], rows["copy"]
    print(
        f"\nMerging modified files, one run ({args.reps} reps, {args.files}-file workspace, "
        f"load average up to {load:.1f} on {os.cpu_count()} cores; p50 / p95 ms)\n"
    )
    print(
        f"| figure | target | {names['auto']} | {names['copy']} | {names['copy']} / {names['auto']} (p95) |"
    )
    print("|---|---|---|---|---|")
    labels = [
        ("merge, 98 modified + 2 new files", "<= 50"),
        ("worst event-loop stall during that merge", "<= 20"),
        (f"merge, one modified {args.big_mb} MB file", ""),
        ("worst event-loop stall during that merge (+ post-fork record)", "<= 20"),
        ("(worst stall of an idle loop, same duration: noise)", ""),
        ("CPU of this process during the 100-file merge (GIL work; children not counted)", ""),
    ]
    for (label, target), sa, sc in zip(labels, a, c, strict=True):
        ratio = pct(sc, 95) / max(pct(sa, 95), 1e-9)
        print(f"| {label} | {target} | {fmt(sa)} | {fmt(sc)} | {ratio:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
