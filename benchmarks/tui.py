"""TUI figures: time to the first frame, and key latency while 10 branches stream.

Targets from issue 7: first frame within 1 s of launch (pydantic-ai imported lazily); with
10 branches streaming, key presses handled within 100 ms.

* **First frame**: ``python -m app.entry WORKSPACE`` is started on a pseudo-terminal with
  ``FORKDECK_FIRST_FRAME_FILE`` set; the app writes the wall-clock time of its first frame
  (and whether pydantic-ai was already imported) there. Baselines in the same run:
  ``python -c pass`` and ``python -c "import textual.app"`` (interpreter start-up and the
  import of the UI toolkit, which no Textual app can avoid).
* **Key latency**: the app under Pilot (headless), 10 branches of a ``FunctionModel`` that
  streams a word every 10 ms (each branch keeps streaming for the whole measurement). Time
  from ``pilot.press`` to the key's effect visible in app state (tab: the active fork tab
  changed; alt+N: branch N shown; a letter: it is in the input). Baseline: the same keys
  on the idle chat screen with no fork.

    /work/venv/bin/python benchmarks/tui.py [--launches 5] [--presses 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# ------------------------------------------------------------------------------ first frame


def _spawn_on_pty(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` with a pseudo-terminal as its stdin/stdout/stderr (Textual needs one)."""
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True
    )
    os.close(slave)
    proc._bench_master = master  # type: ignore[attr-defined]
    return proc


def _drain(proc: subprocess.Popen[bytes]) -> None:
    master = proc._bench_master  # type: ignore[attr-defined]
    try:
        while os.read(master, 65536):
            pass
    except (BlockingIOError, OSError):
        pass


def first_frame_once(workspace: Path, store: Path) -> tuple[float, bool]:
    """Seconds from spawn to the first frame, and whether pydantic-ai was loaded by then."""
    with tempfile.TemporaryDirectory() as tmp:
        marker = Path(tmp) / "first-frame"
        env = {
            **os.environ,
            "FORKDECK_FIRST_FRAME_FILE": str(marker),
            "FORKDECK_STORE": str(store),
            "PYTHONPATH": str(ROOT),
            "TERM": "xterm-256color",
            "COLUMNS": "120",
            "LINES": "40",
        }
        start = time.time()
        proc = _spawn_on_pty([sys.executable, "-m", "app.entry", str(workspace)], env, workspace)
        try:
            deadline = time.monotonic() + 30
            while not marker.exists() or not marker.read_text().strip():
                _drain(proc)
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the app never drew its first frame")
                time.sleep(0.002)
            stamp, loaded = marker.read_text().split()
            return float(stamp) - start, loaded == "1"
        finally:
            proc.kill()
            proc.wait()
            os.close(proc._bench_master)  # type: ignore[attr-defined]


def python_once(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return time.perf_counter() - start


# ------------------------------------------------------------------------------ key latency


def streaming_model() -> Any:
    """A FunctionModel whose every answer streams 4000 words, one per 10 ms."""
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("done")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for i in range(4000):
            await asyncio.sleep(0.01)
            yield f"w{i} "

    return FunctionModel(respond, stream_function=stream, model_name="streamer")


KEY_CHARS = {"tab": "\t", "x": "x"}


async def _latency(pilot: Any, key: str, changed: Callable[[], bool]) -> float:
    """Seconds from the key entering the app (as the terminal driver delivers it) to its effect.

    ``pilot.press`` itself would also wait for the app to go idle, which never happens while
    ten branches stream, so the key event is handed to the driver the way ``press`` does it.
    """
    from textual import events

    app = pilot.app
    event = events.Key(key, KEY_CHARS.get(key))
    event.set_sender(app)
    start = time.perf_counter()
    app._driver.send_message(event)
    while not changed():
        await asyncio.sleep(0.0005)
    return time.perf_counter() - start


async def key_latencies(workspace: Path, presses: int, *, fork: bool) -> list[float]:
    from app.forkdeck_app import ForkdeckApp
    from app.session import ChatSession
    from branching_core.fork import BranchSpec

    session = ChatSession(workspace, requested_model=streaming_model())
    app = ForkdeckApp(session, cursor_blink=False, offer_recovery=False)
    out: list[float] = []
    async with app.run_test(size=(160, 48)) as pilot:
        await asyncio.wait_for(app.prepared.wait(), 30)
        chat = app.chat
        assert chat is not None
        area = None
        if fork:
            specs = [BranchSpec(f"b{i}", f"stream {i}") for i in range(10)]
            coordinator = await session.start_fork(specs, None)
            await chat.open_fork_view(coordinator)
            area = chat.fork_area
            await asyncio.sleep(0.5)  # every branch is streaming by now
        for i in range(presses):
            if area is not None and i % 3 == 0:
                before = area.active_label
                out.append(await _latency(pilot, "tab", lambda b=before: area.active_label != b))
            elif area is not None and i % 3 == 1:
                n = i % 9 + 1
                target = area.labels[n - 1]
                if area.active_label == target:
                    n, target = n % 9 + 1, area.labels[n % 9]
                out.append(
                    await _latency(pilot, f"alt+{n}", lambda t=target: area.active_label == t)
                )
            else:
                chat.input.focus()
                before = len(chat.input.value)
                out.append(await _latency(pilot, "x", lambda b=before: len(chat.input.value) > b))
        if fork:
            running = sum(1 for s in session.coordinator.inspect_branches() if s.state == "running")
            assert running == 10, f"only {running} of 10 branches were still streaming"
            await session.abort_fork()
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--presses", type=int, default=60)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        (workspace / "README.txt").write_text("hello\n")
        store = Path(tmp) / "store"
        os.environ["FORKDECK_STORE"] = str(store)

        frames, lazy = [], []
        for _ in range(args.launches):
            seconds, loaded = first_frame_once(workspace, store)
            frames.append(seconds)
            lazy.append(not loaded)
        bare = [python_once("pass") for _ in range(args.launches)]
        textual_import = [python_once("import textual.app") for _ in range(args.launches)]

        idle = asyncio.run(key_latencies(workspace, args.presses, fork=False))
        busy = asyncio.run(key_latencies(workspace, args.presses, fork=True))

    ms = 1000.0
    print("## forkdeck TUI\n")
    print(f"launches: {args.launches}, key presses per run: {args.presses}\n")
    print("| figure | p50 | p95 | target |")
    print("|---|---:|---:|---|")
    print(
        f"| first frame after launch | {pct(frames, 0.5) * ms:.0f} ms | "
        f"{pct(frames, 0.95) * ms:.0f} ms | < 1000 ms |"
    )
    print(
        f"| baseline: `python -c pass` | {pct(bare, 0.5) * ms:.0f} ms | "
        f"{pct(bare, 0.95) * ms:.0f} ms | |"
    )
    print(
        f"| baseline: `python -c 'import textual.app'` | {pct(textual_import, 0.5) * ms:.0f} ms | "
        f"{pct(textual_import, 0.95) * ms:.0f} ms | |"
    )
    print(
        f"| key press, idle chat | {pct(idle, 0.5) * ms:.1f} ms | {pct(idle, 0.95) * ms:.1f} ms | |"
    )
    print(
        f"| key press, 10 branches streaming | {pct(busy, 0.5) * ms:.1f} ms | "
        f"{pct(busy, 0.95) * ms:.1f} ms | < 100 ms |"
    )
    print()
    ratio = statistics.median(frames) / statistics.median(textual_import)
    print(
        f"first frame / textual import: {ratio:.2f}x; "
        f"pydantic-ai not yet imported at first frame in {sum(lazy)}/{len(lazy)} launches"
    )
    print(f"key latency streaming / idle (p50): {pct(busy, 0.5) / pct(idle, 0.5):.2f}x")


if __name__ == "__main__":
    main()
