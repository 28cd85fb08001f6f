"""Running a shell command for an agent: the runner protocol and two implementations.

The toolset never starts processes itself; it asks a :class:`CommandRunner`. That keeps the
sandbox (namespaces, cgroup limits, kill-the-whole-tree) in one place, lets the fork
coordinator choose per branch, and lets tests run without the sandbox.

* :class:`SandboxCommandRunner` is the default: it calls ``branching_core.sandbox.run_command``
  (imported lazily, so this module loads before the sandbox layer exists) in a worker thread.
* :class:`LocalCommandRunner` is a plain ``asyncio`` subprocess in the directory. It is *not*
  sandboxed: only for tests and for platforms where the sandbox cannot run, and only when a
  caller asks for it explicitly.

``on_output(stream, line)`` receives ``stream`` = ``"stdout"`` or ``"stderr"`` and one line
*without* its newline (the sandbox's convention; a last unterminated piece counts as a
line), in the order each stream produced them. It is always called on the event loop's
thread.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from branching_core.sandbox.limits import ResourceLimits
    from branching_core.sandbox.network import NetworkArg

OutputCallback = Callable[[str, str], None]
"""``on_output(stream, line)``: ``"stdout"``/``"stderr"`` and one line without its newline."""

DEFAULT_CAPTURE_CHARS = 1_000_000
"""Per stream, what a runner keeps in memory (head and tail); the middle of a flood is dropped."""

MAX_LINE_CHARS = 1 << 20
"""The longest piece ``on_output`` receives; a longer line (``cat /dev/zero``) comes in pieces."""

FORWARD_PENDING_BYTES = 4 << 20
"""How much streamed output may wait for the event loop before the producer is held back."""

FORWARD_WAIT_S = 1.0
"""How long the producer is held back before lines are dropped (and the drop announced)."""


@dataclass(frozen=True)
class CommandOutcome:
    """What a finished (or killed) command left behind."""

    exit_code: int | None
    """The process's exit status; negative for a signal; ``None`` if it never started."""
    stdout: str
    stderr: str
    timed_out: bool = False
    oom_killed: bool = False
    duration: float = 0.0


@runtime_checkable
class CommandRunner(Protocol):
    """Runs one shell command line in ``cwd`` and reports it; must kill it at ``timeout``."""

    async def __call__(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float,
        on_output: OutputCallback | None,
    ) -> CommandOutcome: ...


def truncate_middle(text: str, max_chars: int) -> str:
    """Keep the head and the tail of ``text``: the middle of a long output rarely matters."""
    if len(text) <= max_chars:
        return text
    half = max(max_chars // 2, 1)
    dropped = len(text) - 2 * half
    return f"{text[:half]}\n... [{dropped} characters truncated] ...\n{text[-half:]}"


class _Capture:
    """Accumulate one stream's text, keeping at most ``limit`` characters (head + tail)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail: collections.deque[str] = collections.deque()
        self._tail_len = 0
        self._dropped = 0

    def add(self, text: str) -> None:
        half = self._limit // 2
        if self._head_len < half:
            take = text[: half - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            text = text[len(take) :]
        if not text:
            return
        self._tail.append(text)
        self._tail_len += len(text)
        while self._tail_len > half:  # drop from the front, trimming the last piece dropped
            first = self._tail[0]
            excess = self._tail_len - half
            if len(first) <= excess:
                self._tail.popleft()
                cut = len(first)
            else:
                self._tail[0] = first[excess:]
                cut = excess
            self._tail_len -= cut
            self._dropped += cut

    def text(self) -> str:
        head = "".join(self._head)
        tail = "".join(self._tail)
        if self._dropped:
            return f"{head}\n... [{self._dropped} characters dropped] ...\n{tail}"
        return head + tail


async def _pump(
    reader: asyncio.StreamReader, name: str, capture: _Capture, on_output: OutputCallback | None
) -> None:
    """Read a pipe to its end, splitting it into lines for ``on_output`` as they arrive."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    while True:
        chunk = await reader.read(65536)
        final = not chunk
        pending += decoder.decode(chunk, final=final)
        *lines, pending = pending.split("\n")
        for line in lines:
            capture.add(line + "\n")
            if on_output is not None:
                on_output(name, line)
        while len(pending) > MAX_LINE_CHARS:  # a flood without newlines stays bounded
            piece, pending = pending[:MAX_LINE_CHARS], pending[MAX_LINE_CHARS:]
            capture.add(piece)
            if on_output is not None:
                on_output(name, piece)
        if final:
            break
    if pending:
        capture.add(pending)
        if on_output is not None:
            on_output(name, pending)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


@dataclass
class LocalCommandRunner:
    """Unsandboxed fallback: ``/bin/sh -c command`` in ``cwd`` as the current user.

    The command gets its own session so a timeout (or the caller being cancelled) kills its
    whole process group. Processes that leave the group (``setsid``) are not tracked: that
    is exactly what the sandbox runner is for.
    """

    capture_chars: int = DEFAULT_CAPTURE_CHARS
    env: dict[str, str] | None = None

    async def __call__(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float,
        on_output: OutputCallback | None,
    ) -> CommandOutcome:
        started = time.monotonic()
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=os.fspath(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=self.env,
        )
        out, err = _Capture(self.capture_chars), _Capture(self.capture_chars)
        assert proc.stdout is not None and proc.stderr is not None
        pumps = asyncio.gather(
            _pump(proc.stdout, "stdout", out, on_output),
            _pump(proc.stderr, "stderr", err, on_output),
        )
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(pumps), timeout)
            await proc.wait()
        except TimeoutError:
            timed_out = True
            _kill_group(proc)
            await proc.wait()
            # A grandchild outside the group may still hold the pipes: stop reading soon.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pumps, 1.0)
        except BaseException:
            _kill_group(proc)
            pumps.cancel()
            raise
        finally:
            if not pumps.done():
                pumps.cancel()
        return CommandOutcome(
            exit_code=proc.returncode,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            duration=time.monotonic() - started,
        )


class _LoopForwarder:
    """Hands ``on_output`` lines from the sandbox's drain thread to the event loop, bounded.

    One ``call_soon_threadsafe`` per line let a flood (``yes``) queue millions of
    callbacks faster than the loop ran them: gigabytes in the caller. Lines are
    batched instead, and at most ``FORWARD_PENDING_BYTES`` wait for the loop: then the
    drain thread (and so, through the full pipe, the command) waits for the loop to
    catch up. Only if the loop does not run for ``FORWARD_WAIT_S`` (it is blocked, or
    the run is being torn down) are lines dropped, and the next batch starts with one
    stderr line saying how many.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: OutputCallback) -> None:
        self._loop = loop
        self._callback = callback
        self._cond = threading.Condition()
        self._pending: list[tuple[str, str]] = []
        self._pending_bytes = 0
        self._scheduled = False
        self._overflowing = False
        self._dropped = 0

    def __call__(self, stream: str, text: str) -> None:
        with self._cond:
            if (
                self._pending_bytes >= FORWARD_PENDING_BYTES
                and not self._overflowing
                and not self._cond.wait_for(self._has_room, FORWARD_WAIT_S)
            ):
                self._overflowing = True  # drop without waiting until the loop runs
            if self._pending_bytes >= FORWARD_PENDING_BYTES:
                self._dropped += 1
                return
            self._pending.append((stream, text))
            self._pending_bytes += len(text) + 100  # the tuple and str objects themselves
            if not self._scheduled:
                self._scheduled = True
                self._loop.call_soon_threadsafe(self._flush)

    def _has_room(self) -> bool:
        return self._pending_bytes < FORWARD_PENDING_BYTES

    def _flush(self) -> None:
        with self._cond:
            batch, self._pending = self._pending, []
            self._pending_bytes = 0
            self._scheduled = self._overflowing = False
            dropped, self._dropped = self._dropped, 0
            self._cond.notify_all()
        if dropped:
            self._callback(
                "stderr", f"[{dropped} output lines not shown: they came faster than"
                " they could be displayed]"
            )
        for stream, text in batch:
            self._callback(stream, text)


@dataclass
class SandboxCommandRunner:
    """The default runner: ``branching_core.sandbox.run_command`` with the branch's limits.

    It uses ``sandbox.run_command_async`` when the sandbox provides it (cancelling the
    awaiting task then kills the sandboxed tree at once), else the blocking
    ``sandbox.run_command`` in a worker thread. ``on_output`` calls, which the sandbox
    makes from its drain thread, are forwarded to the event loop's thread.
    ``limits`` is a ``branching_core.sandbox.ResourceLimits`` (the sandbox layer is imported
    lazily, so only the type checker imports it here), ``mount_at`` is passed through unchanged. The
    sandbox keeps at most ``capture_chars`` bytes of each stream (head and tail), and the
    forwarding of ``on_output`` lines is bounded too (see ``_LoopForwarder``).
    ``expose_secrets`` shows the homes and credential files the sandbox masks by default.
    """

    limits: ResourceLimits | None = None
    mount_at: Path | str | None = None
    capture_chars: int = DEFAULT_CAPTURE_CHARS
    expose_secrets: bool = False
    network: NetworkArg = False
    """``network=`` of the sandbox: none/private/host or a branch's namespace to join."""

    async def __call__(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float,
        on_output: OutputCallback | None,
    ) -> CommandOutcome:
        # lazy: the agent layer must load without the sandbox layer
        from branching_core.sandbox import run_command_async

        loop = asyncio.get_running_loop()
        forward = _LoopForwarder(loop, on_output) if on_output is not None else None
        kwargs: dict[str, Any] = {
            "timeout": timeout,
            "limits": self.limits,
            "on_output": forward,
            "mount_at": self.mount_at,
            "max_output": self.capture_chars,
            "expose_secrets": self.expose_secrets,
            "network": self.network,
        }
        # cancelling the awaiting task (a terminated branch) kills the sandbox
        result = await run_command_async(command, cwd, **kwargs)
        return CommandOutcome(
            exit_code=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
            timed_out=bool(result.timed_out),
            oom_killed=bool(getattr(result, "oom_killed", False)),
            duration=float(getattr(result, "duration", 0.0) or 0.0),
        )


def sandbox_importable() -> bool:
    """Whether ``branching_core.sandbox`` can be imported here; NOT whether a sandbox can
    run (that is ``branching_core.sandbox.sandbox_available()``, which starts one)."""
    try:
        from branching_core import sandbox
    except ImportError:
        return False
    return hasattr(sandbox, "run_command")


__all__ = [
    "DEFAULT_CAPTURE_CHARS",
    "CommandOutcome",
    "CommandRunner",
    "LocalCommandRunner",
    "OutputCallback",
    "SandboxCommandRunner",
    "sandbox_importable",
    "truncate_middle",
]
