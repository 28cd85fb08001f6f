"""Output capture is bounded on every path: a flood of output cannot grow the caller.

Each flood runs in a fresh interpreter so its peak resident size (VmHWM, a memory
figure, not a time) measures only what the capture kept: 100 MB of output must grow
the caller by less than 60 MB, while ``on_output`` still sees every line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from branching_core.sandbox import BranchContext, run_command
from branching_core.sandbox.capture import BoundedCapture, LineSplitter, dropped_marker

# Every test runs against the native executor and the Python path (conftest.executor).
pytestmark = pytest.mark.usefixtures("executor")

REPO = Path(__file__).resolve().parents[2]
HUNDRED_MB = 100_000_000
GROWTH_LIMIT_KB = 60 * 1024

PRELUDE = r'''
import json, os, sys
def hwm_kb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
ws = sys.argv[1]
from branching_core.sandbox import BranchContext, run_command
run_command(["true"], ws)  # warm up: imports, the drain thread's first stack
'''


def _measure(script: str, ws: Path) -> dict[str, Any]:
    """The JSON line the script printed last (its figures are ints, its texts strings)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", PRELUDE + script, str(ws)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_command_flood_keeps_head_tail_and_dropped_count(ws: Path) -> None:
    out = _measure(r'''
before = hwm_kb()
r = run_command("yes | head -c 100000000; echo done >&2", ws, timeout=240)
print(json.dumps({"growth": hwm_kb() - before, "code": r.exit_code, "len": len(r.stdout),
                  "head": r.stdout[:4], "tail": r.stdout[-4:], "dropped": r.stdout_dropped,
                  "stderr": r.stderr, "stderr_dropped": r.stderr_dropped}))
''', ws)
    assert out["code"] == 0 and out["stderr"] == "done\n" and out["stderr_dropped"] == 0
    assert out["head"] == "y\ny\n" and out["tail"] == "y\ny\n"
    kept = HUNDRED_MB - int(out["dropped"])
    assert 0 < kept <= 8 << 20 and out["dropped"] > 0
    assert out["len"] == kept + len(dropped_marker(int(out["dropped"])))
    assert out["growth"] < GROWTH_LIMIT_KB, f"caller grew {out['growth']} kB for 100 MB"


def test_callable_flood_on_stdout_and_stderr_is_bounded(ws: Path) -> None:
    out = _measure(r'''
def target(path):
    block = b"z" * (1 << 20)
    for _ in range(100):
        os.write(1, block)
        os.write(2, block)
    return "ok"
before = hwm_kb()
with BranchContext(target, ws) as ctx:
    value = ctx.wait(timeout=240)
print(json.dumps({"growth": hwm_kb() - before, "value": value, "out": len(ctx.stdout),
                  "err": len(ctx.stderr), "dropped": ctx.stdout_dropped}))
''', ws)
    assert out["value"] == "ok"
    assert out["dropped"] == 100 * (1 << 20) - (8 << 20)
    assert out["out"] < 9 << 20 and out["err"] < 9 << 20
    assert out["growth"] < GROWTH_LIMIT_KB, f"caller grew {out['growth']} kB for 200 MB"


def test_on_output_sees_every_line_of_a_flood(ws: Path) -> None:
    out = _measure(r'''
count = [0, 0]
def on_output(stream, line):
    count[0] += 1
    count[1] += len(line) == 99
before = hwm_kb()
r = run_command("yes " + "x" * 99 + " | head -n 1000000", ws, timeout=240, on_output=on_output)
print(json.dumps({"growth": hwm_kb() - before, "lines": count[0], "full": count[1],
                  "dropped": r.stdout_dropped}))
''', ws)
    assert out["lines"] == out["full"] == 1_000_000
    assert out["dropped"] == 100_000_000 - (8 << 20)
    assert out["growth"] < GROWTH_LIMIT_KB, f"caller grew {out['growth']} kB"


def test_agent_runner_flood_is_bounded(ws: Path) -> None:
    out = _measure(r'''
import asyncio
from pathlib import Path
from branching_core.agent import SandboxCommandRunner
lines = [0]
async def main():
    return await SandboxCommandRunner()(
        "yes " + "x" * 99 + " | head -n 1000000", cwd=Path(ws), timeout=240,
        on_output=lambda s, t: lines.__setitem__(0, lines[0] + 1))
before = hwm_kb()
o = asyncio.run(main())
print(json.dumps({"growth": hwm_kb() - before, "code": o.exit_code, "len": len(o.stdout),
                  "lines": lines[0]}))
''', ws)
    assert out["code"] == 0
    assert out["len"] < 2_000_000  # the runner keeps about capture_chars (1 MB)
    assert out["lines"] == 1_000_000
    assert out["growth"] < GROWTH_LIMIT_KB, f"caller grew {out['growth']} kB"


def test_max_output_is_per_call(ws: Path) -> None:
    r = run_command("printf 0123456789abcdefghij", ws, max_output=8)
    assert r.stdout == "0123" + dropped_marker(12) + "ghij"
    assert r.stdout_dropped == 12
    with pytest.raises(ValueError, match="max_output"):
        run_command("true", ws, max_output=0)

    def target(path: Path) -> None:
        print("a" * 100, end="")

    with BranchContext(target, ws, max_output=10) as ctx:
        ctx.wait(timeout=30)
    assert ctx.stdout == "aaaaa" + dropped_marker(90) + "aaaaa"


def test_bounded_capture_and_line_splitter_units() -> None:
    cap = BoundedCapture(6)
    for piece in (b"ab", b"cdef", b"ghij", b"k"):
        cap.add(piece)
    assert (cap.head, cap.tail, cap.dropped, cap.total) == (b"abc", b"ijk", 5, 11)
    assert cap.getvalue() == b"abc" + dropped_marker(5).encode() + b"ijk"

    seen: list[str] = []
    split = LineSplitter(seen.append, max_line=4)
    for piece in (b"on", b"e\ntwo\nabcdefghij", b"\n", "é€x".encode()):
        split.feed(piece)
    split.close()
    assert seen == ["one", "two", "abcd", "efgh", "ij", "é", "€x"]
