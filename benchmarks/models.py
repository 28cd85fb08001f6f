"""Real-server figures against the scripted OpenAI-compatible server (loopback, one run).

* the cost of ``ServerModel`` (limits, slot, cut-stream check, usage estimate) per streamed
  request, as a ratio against pydantic-ai's plain ``OpenAIChatModel`` in the same run;
* a 3-branch fork on a single-slot server that interrupts the running stream when another
  request waits (llama-cpp-python's default), with and without
  ``[model] max_concurrent_requests = 1``: branches done / failed, streams cut.

    python benchmarks/models.py [--requests 40] [--forks 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic_ai import Agent

from branching_core.agent.model_config import ModelConfig
from branching_core.agent.models import (
    config_resolver,
    connect_model,
    openai_compatible_model,
)
from branching_core.fork import BranchSpec, ForkCoordinator
from branching_core.workspace import Workspace
from tests.support.openai_server import Reply, ScriptedServer


async def per_request(agent: Agent, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        async with agent.run_stream("hi") as run:
            await run.get_output()
        times.append(time.perf_counter() - start)
    return times


async def overhead(n: int) -> tuple[float, float]:
    with ScriptedServer() as srv:
        plain = Agent(openai_compatible_model(srv.url, "scripted-model"))
        wrapped = Agent(connect_model(None, ModelConfig(default="scripted-model",
                                                        base_url=srv.url), env={}))
        await per_request(plain, 3)  # warm-up (connections, imports)
        await per_request(wrapped, 3)
        a: list[float] = []
        b: list[float] = []
        for _ in range(n):  # interleaved, so load changes hit both alike
            a += await per_request(plain, 1)
            b += await per_request(wrapped, 1)
    return statistics.median(a), statistics.median(b)


async def single_slot(limit: int | None, forks: int) -> tuple[int, int, int]:
    done = failed = cuts = 0
    for _ in range(forks):
        with ScriptedServer(
            single_slot=True, interrupt=True,
            default=Reply("text", ["one ", "two ", "three ", "four."], delay=0.05),
        ) as srv, tempfile.TemporaryDirectory() as tmp:
            config = replace(ModelConfig(default="m", base_url=srv.url),
                             max_concurrent_requests=limit)
            model = connect_model(None, config, env={})
            coord = ForkCoordinator(Agent(model), workspace=Workspace(tmp, backend="copy"),
                                    default_model=model,
                                    model_resolver=config_resolver(config, env={}),
                                    stream_text=True)
            await coord.fork([BranchSpec(n, "go") for n in "abc"], parent_history=[])
            for status in await coord.wait(timeout=120):
                done += status.state == "done"
                failed += status.state == "failed"
            cuts += srv.cuts
            await coord.abort_fork()
    return done, failed, cuts


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--forks", type=int, default=5)
    args = parser.parse_args()
    plain, wrapped = await overhead(args.requests)
    print("| streamed request (median) | plain OpenAIChatModel | ServerModel | ratio |")
    print("|---|---|---|---|")
    print(f"| {args.requests} requests | {plain * 1000:.1f} ms | {wrapped * 1000:.1f} ms "
          f"| {wrapped / plain:.2f} |")
    print()
    print("| 3-branch forks on an interrupting single-slot server | done | failed | cuts |")
    print("|---|---|---|---|")
    for limit in (None, 1):
        d, f, c = await single_slot(limit, args.forks)
        name = "max_concurrent_requests = 1" if limit else "no limit (default)"
        print(f"| {args.forks} forks, {name} | {d} | {f} | {c} |")


if __name__ == "__main__":
    asyncio.run(main())
