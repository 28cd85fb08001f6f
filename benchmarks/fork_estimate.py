"""The ``/fork`` picker's estimate: how long one ``estimate_fork`` takes, and whether the
picker's event loop stays free while it runs (one run).

Why: the picker re-estimates after every pause in typing; if that took long on the event
loop, keys would echo late. It runs in a worker thread; this measures what it costs and
shows the loop lag the thread avoids.

Rows (p50 / max over ``--reps``), for ``--rows`` branches over a parent history of
``--messages`` messages (user prompts, tool calls and results, text answers):

* ``estimate``: one ``estimate_fork`` (genai-prices per request, ``MAX_REQUESTS`` bounded);
* ``baseline: history_stats``: only reading the history (tokens, turns), the part that
  grows with the history, to set the estimate's own cost against;
* ``loop lag, on the loop`` / ``in a thread``: the longest gap a 1 ms ticker on the event
  loop sees while one estimate runs inline vs. through ``asyncio.to_thread`` (the picker's
  way).

    python benchmarks/fork_estimate.py [--reps 15] [--rows 9] [--messages 400]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from branching_core.fork.estimate import estimate_fork, history_stats
from branching_core.fork.types import BranchSpec

MODELS = ["anthropic:claude-sonnet-4-5", "anthropic:claude-opus-4-6", "openai:gpt-4.1"]


def history(n: int) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    i = 0
    while len(out) < n:
        out.append(ModelRequest(parts=[UserPromptPart(f"turn {i}: fix the parser " * 20)]))
        call = ToolCallPart("read_file", {"path": f"src/mod{i}.py"}, tool_call_id=f"c{i}")
        out.append(ModelResponse(parts=[call], usage=RequestUsage(output_tokens=60)))
        out.append(
            ModelRequest(parts=[ToolReturnPart("read_file", "x = 1\n" * 200, tool_call_id=f"c{i}")])
        )
        out.append(
            ModelResponse(parts=[TextPart("done " * 80)], usage=RequestUsage(output_tokens=120))
        )
        i += 1
    return out[:n]


def timed(fn: object, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return times


async def loop_lag(work: object, threaded: bool) -> float:
    """Largest gap (ms) between 1 ms ticks while ``work`` runs."""
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append((now - last) * 1000)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    if threaded:
        await asyncio.to_thread(work)  # type: ignore[arg-type]
    else:
        work()  # type: ignore[operator]
    await asyncio.sleep(0.01)
    done = True
    await task
    return max(gaps)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--rows", type=int, default=9)
    parser.add_argument("--messages", type=int, default=400)
    args = parser.parse_args()
    msgs = history(args.messages)
    specs = [
        BranchSpec(f"b{i}", f"approach {i}", model=MODELS[i % 3], budget_usd=0.5)
        for i in range(args.rows)
    ]

    def estimate() -> object:
        return estimate_fork(specs, msgs)

    estimate()  # warm genai-prices' data
    est = timed(estimate, args.reps)
    base = timed(lambda: history_stats(msgs), args.reps)
    inline = [asyncio.run(loop_lag(estimate, False)) for _ in range(5)]
    threaded = [asyncio.run(loop_lag(estimate, True)) for _ in range(5)]
    print(f"load average {os.getloadavg()[0]:.1f}; {args.rows} rows, {args.messages} messages")
    print(f"estimate                 p50 {statistics.median(est):7.2f} ms  max {max(est):7.2f} ms")
    print(
        f"baseline: history_stats  p50 {statistics.median(base):7.2f} ms  max {max(base):7.2f} ms"
    )
    print(f"ratio estimate / baseline  {statistics.median(est) / statistics.median(base):.1f}x")
    print(f"loop lag, on the loop    p50 {statistics.median(inline):7.2f} ms")
    print(f"loop lag, in a thread    p50 {statistics.median(threaded):7.2f} ms")


if __name__ == "__main__":
    main()
