"""run_command: streaming, timeouts, truncation, and the runner protocol."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic_ai import ToolFailed

from branching_core.agent import (
    CommandOutcome,
    CommandRunner,
    LocalCommandRunner,
    SandboxCommandRunner,
    create_workspace_toolset,
    truncate_middle,
)


async def test_local_runner_streams_lines_in_order(ws: Path) -> None:
    seen: list[tuple[str, str]] = []
    outcome = await LocalCommandRunner()(
        "for i in 1 2 3; do echo line$i; done; echo oops >&2; printf tail",
        cwd=ws,
        timeout=10,
        on_output=lambda stream, text: seen.append((stream, text)),
    )
    assert outcome.exit_code == 0 and not outcome.timed_out
    assert [t for s, t in seen if s == "stdout"] == ["line1", "line2", "line3", "tail"]
    assert [t for s, t in seen if s == "stderr"] == ["oops"]
    assert outcome.stdout == "line1\nline2\nline3\ntail"
    assert outcome.stderr == "oops\n"


async def test_local_runner_streams_while_running(ws: Path) -> None:
    """The first line arrives before the command ends: it is streamed, not buffered."""
    arrivals: list[float] = []
    start = time.monotonic()
    await LocalCommandRunner()(
        "echo first; sleep 0.5; echo second",
        cwd=ws,
        timeout=10,
        on_output=lambda s, t: arrivals.append(time.monotonic() - start),
    )
    assert len(arrivals) == 2
    assert arrivals[0] < 0.4 <= arrivals[1]


async def test_local_runner_runs_in_cwd_and_reports_exit_code(ws: Path) -> None:
    outcome = await LocalCommandRunner()(
        "cat hello.txt; exit 3", cwd=ws, timeout=10, on_output=None
    )
    assert outcome.exit_code == 3
    assert outcome.stdout == "hello world\n"


async def test_local_runner_timeout_kills_the_group(ws: Path) -> None:
    start = time.monotonic()
    outcome = await LocalCommandRunner()(
        "echo started; sleep 30 & sleep 30; echo never", cwd=ws, timeout=0.5, on_output=None
    )
    assert time.monotonic() - start < 5
    assert outcome.timed_out
    assert outcome.stdout == "started\n"
    assert outcome.exit_code is not None and outcome.exit_code < 0


async def test_local_runner_bounds_captured_output(ws: Path) -> None:
    outcome = await LocalCommandRunner(capture_chars=1000)(
        "seq 1 100000", cwd=ws, timeout=10, on_output=None
    )
    assert outcome.stdout.startswith("1\n2\n")
    assert outcome.stdout.rstrip().endswith("100000")
    assert "characters dropped" in outcome.stdout
    assert len(outcome.stdout) < 1100


LOCAL_FLOOD = r'''
import asyncio, json, sys
from pathlib import Path
from branching_core.agent import LocalCommandRunner
def hwm_kb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
seen = [0, 0]
def on_output(stream, text):
    seen[0] += len(text)
    seen[1] = max(seen[1], len(text))
async def main():
    return await LocalCommandRunner()("head -c 100000000 /dev/zero", cwd=Path(sys.argv[1]),
                                      timeout=240, on_output=on_output)
before = hwm_kb()
o = asyncio.run(main())
print(json.dumps({"growth": hwm_kb() - before, "kept": len(o.stdout), "streamed": seen[0],
                  "longest": seen[1], "tail": o.stdout[-5:]}))
'''


def test_local_runner_flood_without_newlines_is_bounded(ws: Path) -> None:
    """100 MB with no newline: the pending line used to grow the caller by 195 MB."""
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", LOCAL_FLOOD, str(ws)], capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["streamed"] == 100_000_000 and out["longest"] == 1 << 20
    assert 1_000_000 <= out["kept"] < 1_000_100 and out["tail"] == "\0" * 5
    assert out["growth"] < 60 * 1024, f"caller grew {out['growth']} kB for 100 MB"


def test_truncate_middle() -> None:
    assert truncate_middle("short", 10) == "short"
    out = truncate_middle("a" * 50 + "b" * 50, 20)
    assert out.startswith("a" * 10) and out.endswith("b" * 10) and "80 characters truncated" in out


def test_runners_satisfy_the_protocol() -> None:
    assert isinstance(LocalCommandRunner(), CommandRunner)
    assert isinstance(SandboxCommandRunner(), CommandRunner)


async def test_run_command_tool_output_and_streaming(ws: Path) -> None:
    seen: list[tuple[str, str]] = []
    tools = create_workspace_toolset(
        ws, command_runner=LocalCommandRunner(), on_output=lambda s, t: seen.append((s, t))
    )
    out = await tools.run_command("echo hi > a.txt; cat a.txt; ls missing")
    assert (ws / "a.txt").read_text() == "hi\n"
    assert out.startswith("exit code 2\nstdout:\nhi\nstderr:\n")
    assert ("stdout", "hi") in seen
    assert await tools.run_command("true") == "exit code 0\n(no output)"


async def test_run_command_tool_timeout(ws: Path) -> None:
    tools = create_workspace_toolset(ws, command_runner=LocalCommandRunner(), command_timeout=30)
    out = await tools.run_command("echo before; sleep 10", timeout=0.3)
    assert out.startswith("timed out after 0.3s; the command was killed")
    assert "before" in out


async def test_run_command_tool_truncates_huge_output(ws: Path) -> None:
    tools = create_workspace_toolset(ws, command_runner=LocalCommandRunner())
    out = await tools.run_command("seq 1 200000")
    assert len(out) < 21_000
    assert "characters truncated" in out
    assert out.rstrip().endswith("200000")


async def test_run_command_uses_the_injected_runner(ws: Path) -> None:
    """Any object with the protocol's signature is a runner; the toolset passes root and timeout."""
    calls: list[tuple[str, Path, float]] = []

    class Recording:
        async def __call__(
            self, command: str, *, cwd: Path, timeout: float, on_output: object
        ) -> CommandOutcome:
            calls.append((command, cwd, timeout))
            return CommandOutcome(exit_code=0, stdout="ran\n", stderr="", oom_killed=False)

    tools = create_workspace_toolset(ws, command_runner=Recording(), command_timeout=7)
    assert await tools.run_command("make") == "exit code 0\nstdout:\nran"
    assert calls == [("make", ws, 7)]
    await tools.run_command("make", timeout=10_000)
    assert calls[-1][2] == 600  # clamped to max_command_timeout


async def test_run_command_refuses_empty(tools: object, ws: Path) -> None:
    tools = create_workspace_toolset(ws, command_runner=LocalCommandRunner())
    with pytest.raises(ToolFailed, match="empty"):
        await tools.run_command("   ")


async def test_a_sandbox_that_cannot_start_fails_readably_and_runs_nothing(ws: Path) -> None:
    """Never an unsandboxed fallback: the model reads why, and no command ran anywhere."""
    runner = SandboxCommandRunner(mount_at="no/such/mount-point")  # real set-up failure
    tools = create_workspace_toolset(ws, command_runner=runner)
    with pytest.raises(ToolFailed, match="could not be started: NamespaceError"):
        await tools.run_command("touch should-not-exist")
    assert not (ws / "should-not-exist").exists()
    assert isinstance(create_workspace_toolset(ws).command_runner, SandboxCommandRunner)


async def test_sandbox_runner_streams_on_the_loop_thread_and_times_out(ws: Path) -> None:
    import threading

    from branching_core.errors import ProcessBranchError

    seen: list[tuple[str, str, bool]] = []
    main = threading.get_ident()
    runner = SandboxCommandRunner()
    try:
        outcome = await runner(
            "echo one; echo two >&2; echo hi > made.txt",
            cwd=ws,
            timeout=30,
            on_output=lambda s, t: seen.append((s, t, threading.get_ident() == main)),
        )
    except ProcessBranchError as exc:  # namespaces unavailable on this machine
        pytest.skip(f"sandbox cannot run here: {exc}")
    assert outcome.exit_code == 0
    assert (ws / "made.txt").read_text() == "hi\n"
    assert sorted(seen) == [("stderr", "two", True), ("stdout", "one", True)]
    killed = await runner("echo x; sleep 30", cwd=ws, timeout=0.5, on_output=None)
    assert killed.timed_out and killed.stdout == "x\n"
