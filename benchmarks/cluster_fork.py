"""Fork branches on Ray: what a tool call costs when the branch's files live in an actor.

One run on a local two-node cluster (``ray.cluster_utils.Cluster``), ratios against
baselines measured in the same run:

* ``write_file`` x N straight on the toolset: a local branch vs a branch actor
  (``RemoteForkBranch.call_tool``), and a bare Ray actor round trip carrying the same
  arguments (what Ray itself costs per call);
* ``run_command('true')`` x M: local sandbox vs the sandbox on the node;
* a whole fork: one branch whose ``FunctionModel`` makes N ``write_file`` calls, run by
  ``ForkCoordinator`` locally and with ``runner=RayRunner()`` (per tool call, end to end);
* the first call on a new branch (actor start, snapshot on the node, branch) and one
  ``sync`` (delta pull into the driver's view) after N files.

    .venv/bin/python benchmarks/cluster_fork.py [--calls 50] [--commands 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ray
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits
from ray.cluster_utils import Cluster

from branching_core.agent import create_workspace_toolset
from branching_core.cluster import RayRunner
from branching_core.fork import BranchSpec
from branching_core.fork.events import BranchToolResult
from branching_core.live import ForkCoordinator
from branching_core.workspace import Workspace


class Echo:
    """The bare baseline: an async actor that returns what it is sent."""

    async def call(self, tool: str, kwargs: dict[str, Any]) -> tuple[bool, Any]:
        return True, f"{tool} {len(kwargs)}"


def make_ws(root: Path, files: int = 100) -> Workspace:
    root.mkdir(parents=True)
    for i in range(files):
        (root / f"f{i:03}.txt").write_text(f"file {i}\n" * 20)
    return Workspace(root)


def per_call(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:.2f} ms"


async def timed_calls(n: int, call: Any) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        await call(i)
        out.append(time.perf_counter() - start)
    return out


def writer_model(n: int) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages if isinstance(m, ModelRequest) for p in m.parts
                   if p.part_kind == "tool-return")
        if done < n:
            return ModelResponse([ToolCallPart("write_file", {
                "path": f"out/{done}.txt", "content": f"line {done}\n" * 10})])
        return ModelResponse([TextPart("done")])

    return FunctionModel(respond)


async def fork_seconds(ws: Workspace, n: int, runner: RayRunner | None) -> tuple[float, float]:
    """(whole fork, per tool call after the first): the second leaves out the actor start."""
    coord = ForkCoordinator(Agent(writer_model(n)), workspace=ws, runner=runner,
                            usage_limits=UsageLimits(request_limit=n + 5))
    results: list[float] = []
    coord.add_listener(lambda e: results.append(time.perf_counter())
                       if isinstance(e, BranchToolResult) else None)
    start = time.perf_counter()
    await coord.fork([BranchSpec("w", "write")], parent_history=[])
    [status] = await coord.wait(timeout=600)
    elapsed = time.perf_counter() - start
    assert status.state == "done", status.error
    await coord.merge_or_select("abort")
    await coord.aclose()
    steady = (results[-1] - results[0]) / (len(results) - 1) if len(results) > 1 else elapsed
    return elapsed, steady


async def run(args: argparse.Namespace, base: Path) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    n, m = args.calls, args.commands
    ws = make_ws(base / "ws")

    # -- straight on the toolset ----------------------------------------------------------
    local_branch = ws.branch("bench-local", on_success=None, on_error=None)
    local_tools = create_workspace_toolset(local_branch.path)

    async def local_write(i: int) -> None:
        local_tools.write_file(f"out/{i}.txt", f"line {i}\n" * 10)

    local = await timed_calls(n, local_write)

    runner = RayRunner()
    start = time.perf_counter()
    [remote] = runner.open_fork_branches(ws, ["bench-remote"],
                                         partial(create_workspace_toolset))
    await remote.call_tool("list_dir", {"path": "."})
    first = time.perf_counter() - start

    async def remote_write(i: int) -> None:
        await remote.call_tool("write_file", {"path": f"out/{i}.txt",
                                              "content": f"line {i}\n" * 10})

    remote_times = await timed_calls(n, remote_write)
    echo: Any = ray.remote(num_cpus=0)(Echo).remote()
    await echo.call.remote("warm", {})

    async def bare(i: int) -> None:
        await echo.call.remote("write_file", {"path": f"out/{i}.txt",
                                              "content": f"line {i}\n" * 10})

    bare_times = await timed_calls(n, bare)
    start = time.perf_counter()
    remote.sync()
    sync_s = time.perf_counter() - start

    async def local_true(i: int) -> None:
        await local_tools.run_command("true")

    async def remote_true(i: int) -> None:
        await remote.call_tool("run_command", {"command": "true"})

    await local_true(0)
    await remote_true(0)
    local_cmd = await timed_calls(m, local_true)
    remote_cmd = await timed_calls(m, remote_true)
    remote.abort()
    local_branch.abort()
    ray.kill(echo)

    added = statistics.median(remote_times) - statistics.median(local)
    rows.append((f"write_file x{n}, local branch (p50 per call)", per_call(local), "1.00"))
    rows.append((f"write_file x{n}, branch actor (p50 per call)", per_call(remote_times),
                 f"{statistics.median(remote_times) / statistics.median(local):.1f}"))
    rows.append(("  of which a bare Ray actor round trip (p50)", per_call(bare_times),
                 f"{statistics.median(bare_times) / statistics.median(local):.1f}"))
    rows.append(("  added per call by the actor (p50 difference)", f"{added * 1000:.2f} ms", ""))
    rows.append((f"run_command('true') x{m}, local sandbox (p50)", per_call(local_cmd), "1.00"))
    rows.append((f"run_command('true') x{m}, sandbox on the node (p50)", per_call(remote_cmd),
                 f"{statistics.median(remote_cmd) / statistics.median(local_cmd):.2f}"))
    rows.append(("first call on a new branch (actor start + snapshot + branch)",
                 f"{first * 1000:.0f} ms", ""))
    rows.append((f"sync after {n} files (delta pull into the driver's view)",
                 f"{sync_s * 1000:.1f} ms", ""))

    # -- a whole fork: the model loop here, the tools local or on the actor ----------------
    await fork_seconds(ws, 2, None)  # warm both paths (imports, model schema caches)
    await fork_seconds(ws, 2, runner)
    local_fork, local_step = await fork_seconds(ws, n, None)
    remote_fork, remote_step = await fork_seconds(ws, n, runner)
    rows.append((f"fork, 1 branch, {n} write_file calls, local: whole fork",
                 f"{local_fork * 1000:.0f} ms", "1.00"))
    rows.append((f"fork, 1 branch, {n} write_file calls, on Ray: whole fork",
                 f"{remote_fork * 1000:.0f} ms", f"{remote_fork / local_fork:.1f}"))
    rows.append(("  per model turn + tool call, local (after the first)",
                 f"{local_step * 1000:.2f} ms", "1.00"))
    rows.append(("  per model turn + tool call, on Ray (after the first)",
                 f"{remote_step * 1000:.2f} ms", f"{remote_step / local_step:.1f}"))
    ws.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--commands", type=int, default=10)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="forkdeck-bench-rayfork-"))
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": 100 << 20,
        "env_vars": {"FORKDECK_RAY_CACHE": str(base / "cache-head")},
    })
    cluster.add_node(num_cpus=1, object_store_memory=100 << 20,
                     env_vars={"FORKDECK_RAY_CACHE": str(base / "cache-worker")})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        rows = asyncio.run(run(args, base))
    finally:
        ray.shutdown()
        cluster.shutdown()
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores\n")
    print("| measurement | value | ratio |")
    print("|---|---|---|")
    for name, value, ratio in rows:
        print(f"| {name} | {value} | {ratio} |")


if __name__ == "__main__":
    main()
