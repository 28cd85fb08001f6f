"""What the MCP front door costs: forkdeck's tools over stdio beside a bare MCP call.

1. Round trip of ``branch_create`` + ``branch_run('true')`` + ``branch_abort`` through the
   official MCP client over stdio against ``forkdeck mcp``, beside a bare tool call that
   does nothing, on a minimal MCPServer of the same SDK, in the same run (the protocol's
   own floor: JSON-RPC over pipes, schema validation, a worker thread). Also each step
   alone and ``branch_list`` (forkdeck's cheapest tool). The ratio is what matters: this
   machine is shared and noisy.
2. ``explore`` with 8 trivial candidates (``true``, best_score) over MCP, beside
   ``forkdeck best-of-n -n 8 -- true`` from the CLI (a fresh process each time, so it
   also pays interpreter start and workspace open; the MCP server paid those once).

Run: ``python benchmarks/mcp.py [--reps 30] [--backend auto]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# This file is named like the SDK: run as a script, its own directory (sys.path[0])
# would make `import mcp` import itself.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]
sys.path.insert(0, str(REPO))

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

BARE_SERVER = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("bare", log_level="WARNING")

@server.tool()
def noop() -> dict:
    return {}

server.run()
"""


def _params(args: list[str], env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(REPO))


async def _time(reps: int, step: Callable[[], Awaitable[object]]) -> list[float]:
    await step()  # warm up
    out = []
    for _ in range(reps):
        start = time.perf_counter()
        await step()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _row(name: str, ms: list[float], floor: float | None) -> str:
    p50 = statistics.median(ms)
    p95 = sorted(ms)[max(0, int(len(ms) * 0.95) - 1)]
    ratio = f"{p50 / floor:6.1f}x" if floor else "      "
    return f"| {name:<44} | {p50:8.2f} | {p95:8.2f} | {ratio} |"


async def _check(session: ClientSession, tool: str, args: dict[str, object]) -> dict:
    result = await session.call_tool(tool, args)
    if result.is_error:
        raise RuntimeError(f"{tool}: {result.content}")
    return dict(result.structured_content or {})


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--backend", default="auto")
    opts = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    ws = tmp / "ws"
    (ws / "src").mkdir(parents=True)
    for i in range(200):
        (ws / "src" / f"m{i}.py").write_text(f"X = {i}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "FORKDECK_STORE": str(tmp / "stores")}
    rows: list[str] = []

    async with stdio_client(_params(["-c", BARE_SERVER], env)) as (r, w), \
            ClientSession(r, w) as bare:
        await bare.initialize()
        floor_ms = await _time(opts.reps, lambda: bare.call_tool("noop", {}))
    floor = statistics.median(floor_ms)
    rows.append(_row("bare MCP tool call (noop, same SDK)", floor_ms, None))

    server = ["-m", "branching_core.cli", "mcp", str(ws), "--backend", opts.backend]
    async with stdio_client(_params(server, env)) as (r, w), ClientSession(r, w) as session:
        await session.initialize()
        rows.append(_row("branch_list (no branches)", await _time(
            opts.reps, lambda: _check(session, "branch_list", {})), floor))
        steps: dict[str, list[float]] = {"branch_create": [], "branch_run('true')": [],
                                         "branch_abort": [], "round trip": []}
        for i in range(opts.reps + 1):
            t0 = time.perf_counter()
            await _check(session, "branch_create", {"name": f"r{i}"})
            t1 = time.perf_counter()
            await _check(session, "branch_run", {"label": f"r{i}", "command": "true"})
            t2 = time.perf_counter()
            await _check(session, "branch_abort", {"label": f"r{i}"})
            t3 = time.perf_counter()
            if i:  # the first is a warm-up
                for name, ms in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True):
                    steps[name].append(ms * 1000)
        for name, ms in steps.items():
            rows.append(_row(name, ms, floor))
        explore_reps = max(3, opts.reps // 5)
        explore_ms = await _time(explore_reps, lambda: _check(
            session, "explore", {"commands": ["true"] * 8, "mode": "best_score"}))

    cli_ms = []
    for _ in range(explore_reps):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "branching_core.cli", "best-of-n", "-n", "8",
                        "-w", str(ws), "--backend", opts.backend, "--json", "--", "true"],
                       env=env, check=True, capture_output=True)
        cli_ms.append((time.perf_counter() - start) * 1000)

    load = os.getloadavg()
    print(f"workspace: 200 files; reps {opts.reps}; load average {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f}\n")
    print("| step (stdio)                                 | p50 ms   | p95 ms   | x bare  |")
    print("|----------------------------------------------|----------|----------|---------|")
    print("\n".join(rows))
    print()
    print("| 8 trivial candidates                         | p50 ms   | p95 ms   |")
    print("|----------------------------------------------|----------|----------|")
    for name, ms in (("explore over MCP (best_score, commit)", explore_ms),
                     ("forkdeck best-of-n -n 8 -- true (CLI)", cli_ms)):
        p95 = sorted(ms)[max(0, int(len(ms) * 0.95) - 1)]
        print(f"| {name:<44} | {statistics.median(ms):8.1f} | {p95:8.1f} |")


if __name__ == "__main__":
    asyncio.run(main())
