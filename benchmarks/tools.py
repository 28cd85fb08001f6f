"""Workspace-tool figures: the bounded ``grep`` against a plain ``re`` loop (one run).

``grep`` matches with the ``regex`` engine so that a catastrophic pattern can be stopped
and never holds the GIL; this measures what that costs on an ordinary tree, as a ratio
against the old way (stdlib ``re``, one search per line) timed in the same run, plus the
ticks another thread makes while a catastrophic pattern runs into the deadline.

    python benchmarks/tools.py [--files 1000] [--lines 200] [--reps 5]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branching_core.agent import LocalCommandRunner, create_workspace_toolset


def best_ms(func: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="forkdeck-bench-tools-") as tmp:
        root = Path(tmp)
        body = "".join(
            f"def func_{j}(x):\n    return x + {j}  # comment\n" for j in range(args.lines // 2)
        )
        for i in range(args.files):
            directory = root / f"d{i % 20}"
            directory.mkdir(exist_ok=True)
            (directory / f"f{i}.py").write_text(body)
        tools = create_workspace_toolset(root, command_runner=LocalCommandRunner())

        def plain_re(pattern: str) -> None:
            compiled = re.compile(pattern)
            for path in sorted(root.rglob("*.py")):
                for line in path.read_text().splitlines():
                    compiled.search(line)

        print(f"{args.files} files, {args.files * args.lines} lines, best of {args.reps}\n")
        print("| pattern | grep tool (ms) | re per line (ms) | ratio |")
        print("|---|---|---|---|")
        for pattern in (r"return x \+ 99\b", "zzz", "comment$", r"(?<=x )\+ 5\b"):
            ours = best_ms(lambda: tools.grep(pattern), args.reps)
            base = best_ms(lambda: plain_re(pattern), args.reps)
            print(f"| `{pattern}` | {ours:.0f} | {base:.0f} | {ours / base:.2f} |")

        (root / "victim.txt").write_text("a" * 34 + "b\n")
        tools.search_timeout = 1.0
        ticks = 0
        worker = threading.Thread(target=lambda: _swallow(lambda: tools.grep(r"^(a|aa)+$")))
        worker.start()
        while worker.is_alive():
            ticks += 1
            time.sleep(0.001)
        print(f"\nticks of another thread (1 ms sleeps) during a 1 s catastrophic grep: {ticks}")


def _swallow(func: Callable[[], object]) -> None:
    try:
        func()
    except Exception:
        pass


if __name__ == "__main__":
    main()
