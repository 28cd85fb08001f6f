"""TUI figures measured end to end through a real terminal (tmux), beside a bare Textual app.

Targets (issue 13): key echo p95 < 50 ms with 10 branches streaming; tab switch p95 <
100 ms; typing accepted from the first frame (queued until the model is ready); first
frame < 500 ms.

* **Key echo**: a key is sent with ``tmux send-keys`` and the pane is polled with
  ``capture-pane`` until the character is drawn in the composer. The same measurement on
  a bare Textual app (one ``TextArea``) in the same run is the baseline: it carries the
  same tmux and polling overhead, so the difference is what forkdeck adds. Measured on the
  idle chat and with 10 branches of a ``FunctionModel`` that streams a word every 10 ms.
* **Tab switch**: ``Tab`` until the next branch's panel header (``branch bN ·``) is on
  screen, with the 10 branches streaming.
* **Typed from the first frame**: a line is sent the moment the composer is on screen;
  it must be queued ("queued until the model is ready") or run, never refused.
* **First frame**: ``python -m forkdeck.entry`` on a pseudo-terminal with
  ``FORKDECK_FIRST_FRAME_FILE``; baselines: the bare app's first frame (same marker),
  ``python -c pass`` and ``import textual.app``.

The machine this runs on is shared, and its load swings within one run; so every
forkdeck figure is measured in blocks that alternate with the same measurement on the
baseline (launches alternate; key echo alternates in blocks of 10 keys with the bare app,
which stays open the whole run), and the table gives each p95 as a ratio to the bare
app's p95 over the same blocks. The bare app's echo is measured while forkdeck's process
runs beside it (idle, or with its branches streaming), so both share the same CPU.

    python benchmarks/tui.py [--launches 5] [--presses 60] [--switches 132]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pty
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TMUX = shutil.which("tmux") or "tmux"

LAUNCHER = textwrap.dedent(
    '''
    """Started inside tmux by benchmarks/tui.py: MODE is bare | idle | fork10."""
    import asyncio, sys
    from pathlib import Path

    mode, workspace = sys.argv[1], Path(sys.argv[2])

    if mode == "bare":
        import os, time
        from textual.app import App
        from textual.widgets import TextArea

        class Bare(App):
            def compose(self):
                yield TextArea(id="t")

            def on_mount(self):
                self.call_after_refresh(self.first_frame)

            def first_frame(self):  # the same marker protocol as ForkdeckApp
                marker = os.environ.get("FORKDECK_FIRST_FRAME_FILE")
                if marker:
                    with open(marker, "w") as f:
                        f.write(f"{time.time():.6f} 0\\n")

        Bare().run()
        raise SystemExit(0)

    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel
    from forkdeck.forkdeck_app import ForkdeckApp
    from forkdeck.session import ChatSession
    from branching_core.fork import BranchSpec

    async def respond(messages, info):
        return ModelResponse(parts=[TextPart("done")])

    async def stream(messages, info):
        for i in range(100000):
            await asyncio.sleep(0.01)
            yield f"w{i} "

    model = FunctionModel(respond, stream_function=stream, model_name="streamer")

    class Bench(ForkdeckApp):
        async def _prepare(self):
            await super()._prepare()
            if mode == "fork10":
                specs = [BranchSpec(f"b{i}", f"stream {i}") for i in range(10)]
                coordinator = await self.session.start_fork(specs, None)
                await self.chat.open_fork_view(coordinator)
                self.chat.notice("BENCH-FORK-READY")

    app = Bench(ChatSession(workspace, requested_model=model), offer_recovery=False)
    profile = __import__("os").environ.get("BENCH_PROFILE")
    if profile:  # python benchmarks/tui.py --profile: where the event loop's time goes
        import cProfile

        cProfile.run("app.run()", profile)
    else:
        app.run()
    '''
)


class Pane:
    """One tmux session on a private server running ``argv``."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.socket = f"fd-bench-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}='{v}'" for k, v in env.items())
        command = f"cd '{cwd}' && env {exports} " + " ".join(f"'{a}'" for a in argv)
        self.tmux("new-session", "-d", "-s", "b", "-x", "160", "-y", "48", command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            [TMUX, "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=False,
        ).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "b")

    def send(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "b", *keys)

    def wait(self, check: Callable[[str], bool], timeout: float = 60.0) -> float:
        """Poll the screen until ``check``; seconds waited (RuntimeError on timeout)."""
        start = time.perf_counter()
        while True:
            text = self.screen()
            if check(text):
                return time.perf_counter() - start
            if time.perf_counter() - start > timeout:
                raise RuntimeError(f"timed out; the screen shows:\n{text}")

    def close(self) -> None:
        self.tmux("kill-server")
        # tmux leaves its socket file behind after kill-server
        base = os.environ.get("TMUX_TMPDIR") or "/tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(base, f"tmux-{os.getuid()}", self.socket))


def echo_latencies(pane: Pane, presses: int, prefix: str = "") -> list[float]:
    """Type ``presses`` letters one at a time; seconds until each is drawn. Starts with
    ``j`` (no screen here shows one elsewhere) and leaves the composer empty again."""
    out: list[float] = []
    typed = prefix
    for i in range(presses):
        if len(typed) >= 40:
            pane.send("C-u")
            pane.wait(lambda s, t=typed: t not in s, timeout=10)
            typed = prefix
        char = "jxvqz"[i % 5]
        typed += char
        start = time.perf_counter()
        pane.send("-l", char)
        pane.wait(lambda s, t=typed: t in s, timeout=10)
        out.append(time.perf_counter() - start)
    pane.send("C-u")
    if typed:
        pane.wait(lambda s, t=typed: t not in s, timeout=10)
    return out


def tab_latencies(pane: Pane, switches: int) -> list[float]:
    """``Tab`` through the branches; seconds until the next branch's header is drawn."""
    out: list[float] = []
    order = [None, *(f"b{i}" for i in range(10))]
    current = 0
    for _ in range(switches):
        current = (current + 1) % len(order)
        label = order[current]
        start = time.perf_counter()
        pane.send("Tab")
        if label is None:
            pane.wait(lambda s: "10 branches ·" in s and "branch b" not in s, timeout=10)
        else:
            pane.wait(lambda s, lab=label: f"branch {lab} ·" in s, timeout=10)
        out.append(time.perf_counter() - start)
    return out


def launch(mode: str, workspace: Path, launcher: Path, store: Path) -> Pane:
    env = {
        "FORKDECK_STORE": str(store),
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workspace.parent),
    }
    return Pane([sys.executable, str(launcher), mode, str(workspace)], env, workspace)


def typed_from_first_frame(workspace: Path, store: Path) -> tuple[bool, str]:
    """Send a line as soon as the composer is drawn; was it queued or run (not refused)?"""
    env = {
        "FORKDECK_STORE": str(store),
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workspace.parent),
    }
    pane = Pane([sys.executable, "-m", "forkdeck.entry", "."], env, workspace)
    try:
        pane.wait(lambda s: "Message, /command" in s, timeout=30)
        pane.send("!echo early > early-bench.txt", "Enter")
        pane.wait(lambda s: "queued until" in s or "(exit 0)" in s, timeout=30)
        queued = "queued until the model is ready" in pane.screen()
        pane.wait(lambda _s: (workspace / "early-bench.txt").exists(), timeout=30)
        return True, "queued, then run" if queued else "run at once (model already ready)"
    except RuntimeError:
        return False, "refused or lost"
    finally:
        pane.close()
        (workspace / "early-bench.txt").unlink(missing_ok=True)


# ------------------------------------------------------------------------------ first frame


def first_frame_once(
    workspace: Path, store: Path, argv: list[str] | None = None
) -> tuple[float, bool]:
    """Seconds from spawn to the first frame, and whether pydantic-ai was loaded by then
    (``argv``: another program with the same marker protocol, e.g. the bare app)."""
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
        master, slave = pty.openpty()
        os.set_blocking(master, False)
        start = time.time()
        proc = subprocess.Popen(
            argv or [sys.executable, "-m", "forkdeck.entry", str(workspace)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=workspace,
            close_fds=True,
        )
        os.close(slave)
        try:
            deadline = time.monotonic() + 30
            while not marker.exists() or not marker.read_text().strip():
                try:
                    while os.read(master, 65536):
                        pass
                except (BlockingIOError, OSError):
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the app never drew its first frame")
                time.sleep(0.002)
            stamp, loaded = marker.read_text().split()
            return float(stamp) - start, loaded == "1"
        finally:
            proc.kill()
            proc.wait()
            os.close(master)


def python_once(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return time.perf_counter() - start


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(name: str, values: list[float], target: str = "") -> str:
    ms = 1000.0
    return (
        f"| {name} | {pct(values, 0.5) * ms:.0f} ms | {pct(values, 0.95) * ms:.0f} ms | "
        f"{max(values) * ms:.0f} ms | {target} |"
    )


BLOCK = 10
"""Keys (or tab switches) measured in a row before switching to the baseline and back."""


def interleaved(
    measure: Callable[[int], list[float]], baseline: Pane, total: int, block: int = BLOCK
) -> tuple[list[float], list[float]]:
    """``measure`` and the bare app's key echo in alternating blocks of :data:`BLOCK`, so
    both see the same machine load (this machine is shared: load swings within a run)."""
    ours: list[float] = []
    bare: list[float] = []
    while len(ours) < total:
        bare += echo_latencies(baseline, BLOCK)
        ours += measure(min(block, total - len(ours)))
    return ours, bare


def ratio(ours: list[float], bare: list[float], q: float = 0.95) -> str:
    return f"{pct(ours, q) / pct(bare, q):.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--presses", type=int, default=60)
    parser.add_argument(
        "--switches",
        type=int,
        default=0,
        help="tab switches (whole cycles of 11; default: about presses / 2); a p95 over "
        "33 switches is the second slowest of them, too few to see a rare pause",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        (workspace / "README.txt").write_text("hello\n")
        store = Path(tmp) / "store"
        os.environ["FORKDECK_STORE"] = str(store)
        launcher = Path(tmp) / "launcher.py"
        launcher.write_text(LAUNCHER)

        # Launches alternate forkdeck / bare app / imports, for the same reason.
        frames, bare_frames, lazy, bare_py, textual_import = [], [], [], [], []
        for _ in range(args.launches):
            seconds, loaded = first_frame_once(workspace, store)
            frames.append(seconds)
            lazy.append(not loaded)
            bare_argv = [sys.executable, str(launcher), "bare", str(workspace)]
            bare_frames.append(first_frame_once(workspace, store, bare_argv)[0])
            bare_py.append(python_once("pass"))
            textual_import.append(python_once("import textual.app"))
        accepted = typed_from_first_frame(workspace, store)

        bare_pane = launch("bare", workspace, launcher, store)
        try:
            time.sleep(3.0)  # Textual imported and the TextArea drawn
            bare_pane.wait(lambda s: "▊" in s or "▎" in s, timeout=30)

            pane = launch("idle", workspace, launcher, store)
            try:
                pane.wait(lambda s: "type a message" in s, timeout=60)
                idle, bare_idle = interleaved(
                    lambda n: echo_latencies(pane, n), bare_pane, args.presses
                )
            finally:
                pane.close()

            pane = launch("fork10", workspace, launcher, store)
            try:
                pane.wait(lambda s: "BENCH-FORK-READY" in s, timeout=90)
                time.sleep(1.0)  # every branch is streaming by now
                busy, bare_busy = interleaved(
                    lambda n: echo_latencies(pane, n), bare_pane, args.presses
                )
                wanted = args.switches or args.presses // 2
                switches = 11 * max(1, wanted // 11)  # whole cycles: back on overview
                tabs, bare_tabs = interleaved(  # whole cycles: each block starts on the overview
                    lambda n: tab_latencies(pane, n), bare_pane, switches, block=11
                )
                pane.send("F1")  # a branch panel in front instead of the overview table
                pane.wait(lambda s: "branch b0 ·" in s, timeout=10)
                on_branch, bare_branch = interleaved(
                    lambda n: echo_latencies(pane, n), bare_pane, args.presses
                )
                still = pane.screen()
            finally:
                pane.close()
        finally:
            bare_pane.close()

    bare_all = bare_idle + bare_busy + bare_tabs + bare_branch
    print("## forkdeck TUI, end to end through tmux\n")
    print(
        f"launches: {args.launches}, keys per measurement: {args.presses}; each forkdeck "
        f"figure alternates in blocks of {BLOCK} with the bare app's key echo\n"
    )
    print("| figure | p50 | p95 | max | target | p95 / bare app's (same blocks) |")
    print("|---|---:|---:|---:|---|---:|")
    print(row("first frame after launch", frames, "< 500 ms") + f" {ratio(frames, bare_frames)} |")
    print(row("baseline: first frame, bare Textual app (TextArea)", bare_frames) + " |")
    print(row("baseline: `python -c pass`", bare_py) + " |")
    print(row("baseline: `python -c 'import textual.app'`", textual_import) + " |")
    print(row("key echo, bare Textual app (TextArea), all blocks", bare_all) + " |")
    print(row("key echo, forkdeck idle chat", idle) + f" {ratio(idle, bare_idle)} |")
    print(
        row("key echo, 10 branches streaming (overview shown)", busy, "p95 < 50 ms")
        + f" {ratio(busy, bare_busy)} |"
    )
    print(
        row("key echo, 10 branches streaming (branch panel shown)", on_branch, "p95 < 50 ms")
        + f" {ratio(on_branch, bare_branch)} |"
    )
    print(
        row("tab switch, 10 branches streaming", tabs, "p95 < 100 ms")
        + f" {ratio(tabs, bare_tabs)} |"
    )
    print()
    print(
        f"typed from the first frame: {'accepted' if accepted[0] else 'NOT accepted'} ({accepted[1]})"
    )
    print(f"pydantic-ai not yet imported at the first frame in {sum(lazy)}/{len(lazy)} launches")
    print(f"branches still streaming at the end: {'● b' in still}")


if __name__ == "__main__":
    main()
