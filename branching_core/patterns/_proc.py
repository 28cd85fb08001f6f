"""Where a candidate runs: a thread, a plain forked child, or a sandbox.

Every way of running a candidate is a *handle* with two methods: ``run(timeout)``
blocks until the candidate ends and returns its value (raising its exception, or
``CandidateTimeout`` after killing it), and ``kill()`` (thread-safe, idempotent)
makes a running ``run`` return promptly.

* ``ThreadHandle`` runs the callable in this process. It cannot be killed, so the
  runner only uses it when nothing could ever need to kill it (no timeout, no
  race, no isolation). Its return value and side effects stay in-process.
* ``ChildProcessHandle`` is a plain ``fork()``: no namespaces or limits, but killable. The
  child gets its own process group, and ``kill()`` SIGKILLs the group, so helper
  processes the candidate started die with it (a descendant that calls ``setsid``
  escapes; use ``isolate_processes=True`` for a guarantee). The value comes back
  pickled, exceptions keep their type. Completion is detected with a pidfd, never
  with pipe EOF, so a result pipe whose write end leaked into a sibling fork cannot
  delay a finished candidate behind a slower one. The child freezes the inherited
  heap (``gc.freeze``) so its collections do not copy the caller's memory page by
  page, and leaves with ``os._exit`` (no atexit handlers, no finalizers).
* ``SandboxHandle`` is the sandbox's ``BranchContext`` (namespaces, cgroup limits,
  whole-tree kill).
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from branching_core.errors import BranchingError, ProcessBranchError
from branching_core.sandbox.limits import ResourceLimits

_FORK_LOCK = threading.Lock()
_HEADER = struct.Struct("<QQ")


class CandidateTimeout(BranchingError):
    """The candidate hit its deadline and was killed (not a TimeoutError it raised itself)."""


class Handle(Protocol):
    def run(self, timeout: float | None) -> Any: ...

    def kill(self) -> None: ...


def unwrap(exc: BaseException) -> BaseException:
    """The candidate's own exception when a process boundary wrapped it."""
    if isinstance(exc, ProcessBranchError) and exc.exception is not None:
        return exc.exception
    return exc


class ThreadHandle:
    """Run ``fn(path)`` in a daemon thread of this process (never killable)."""

    def __init__(self, fn: Callable[[Path], Any], path: Path) -> None:
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(fn, path), daemon=True)
        self._thread.start()

    def _main(self, fn: Callable[[Path], Any], path: Path) -> None:
        try:
            self._value = fn(path)
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.set()

    def run(self, timeout: float | None) -> Any:
        if not self._done.wait(timeout):
            raise CandidateTimeout(f"did not finish within {timeout} s (thread not killable)")
        if self._error is not None:
            raise self._error
        return self._value

    def kill(self) -> None:
        """Threads cannot be killed; the runner aborts the branch under them instead."""


class ChildProcessHandle:
    """Run ``fn(path)`` in a plain forked child in its own process group.

    The thread that calls ``run`` waits on the result pipe and the child's pidfd
    itself (one ``poll`` per wake-up, no helper thread and no sleeping), so sixteen
    candidates cost sixteen forks and nothing more in this process.
    """

    def __init__(self, fn: Callable[[Path], Any], path: Path) -> None:
        from branching_core.sandbox.results import encode_exception, encode_value

        self._data = bytearray()
        r, w = os.pipe2(os.O_CLOEXEC)
        with _FORK_LOCK:  # no sibling fork can inherit ``w`` between fork and close
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child
                code = 0
                try:
                    # O(1): the parent's objects move to the permanent generation, so a
                    # collection in the candidate never walks (and copies) the caller's heap.
                    gc.freeze()
                    os.setpgid(0, 0)
                    os.close(r)
                    try:
                        meta, payload = encode_value(fn(path))
                    except SystemExit as exc:
                        if exc.code in (None, 0):
                            meta, payload = encode_value(None)
                        else:
                            meta, payload = encode_exception(exc)
                    except BaseException as exc:
                        meta, payload = encode_exception(exc)
                        code = 1
                    with contextlib.suppress(Exception):
                        sys.stdout.flush()
                        sys.stderr.flush()
                    record = _HEADER.pack(len(meta), len(payload)) + meta + payload
                    view = memoryview(record)
                    while view:
                        view = view[os.write(w, view):]
                finally:
                    os._exit(code)  # never the caller's atexit handlers or finalizers
            os.close(w)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # the child does it too; whichever runs first wins
        self.pid = pid
        self._pidfd = os.pidfd_open(pid)
        self._r = r
        os.set_blocking(r, False)
        self._status = 0
        self._lock = threading.Lock()
        self._reaped = False

    def _wait_exit(self, timeout: float | None) -> bool:
        """Read the pipe until the child has exited (pidfd readable); False on timeout.

        Pipe EOF alone proves nothing (a sibling fork may hold the write end), and the
        pipe must be drained while waiting or a large result would block the child.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        poller = select.poll()
        poller.register(self._r, select.POLLIN)
        poller.register(self._pidfd, select.POLLIN)
        pipe_open = True
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            events = poller.poll(None if left is None else left * 1000)
            if not events and left is not None and left <= 0:
                return False
            for fd, _ in events:
                if fd == self._r and pipe_open and self._read_available() is None:
                    pipe_open = False
                    poller.unregister(self._r)
                elif fd == self._pidfd:
                    if pipe_open:
                        self._read_available()
                    return True

    def _reap(self) -> None:
        with self._lock:
            if self._reaped:
                return
            # Whatever the candidate left running in its group dies with it.
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
            _, self._status = os.waitpid(self.pid, 0)
            self._reaped = True
            os.close(self._r)
            os.close(self._pidfd)

    def _read_available(self) -> int | None:
        total = 0
        while True:
            try:
                chunk = os.read(self._r, 1 << 16)
            except BlockingIOError:
                return total
            if not chunk:
                return None
            self._data += chunk
            total += len(chunk)

    def run(self, timeout: float | None) -> Any:
        from branching_core.sandbox.results import decode

        if not self._reaped:
            if not self._wait_exit(timeout):
                self.kill()
                self._wait_exit(None)
                self._reap()
                raise CandidateTimeout(f"did not finish within {timeout} s; killed")
            self._reap()
        data = bytes(self._data)
        code = os.waitstatus_to_exitcode(self._status)
        if len(data) >= _HEADER.size:
            meta_len, payload_len = _HEADER.unpack_from(data)
            end = _HEADER.size + meta_len + payload_len
            if len(data) >= end:
                meta = data[_HEADER.size:_HEADER.size + meta_len]
                decoded = decode(meta, data[_HEADER.size + meta_len:end], exit_code=code)
                if decoded.ok:
                    return decoded.value
                assert decoded.error is not None
                raise unwrap(decoded.error)
        if code < 0:
            name = signal.Signals(-code).name
            raise ProcessBranchError(f"candidate killed by {name}", exit_code=code, signal=-code)
        raise ProcessBranchError(f"candidate exited with code {code} without a result",
                                 exit_code=code)

    def kill(self) -> None:
        with self._lock:
            if self._reaped:
                return
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)


class SandboxHandle:
    """Run ``fn(path)`` in the sandbox layer's ``BranchContext`` (with limits)."""

    def __init__(self, fn: Callable[[Path], Any], path: Path, limits: ResourceLimits | None
                 ) -> None:
        from branching_core.sandbox import BranchContext

        # ``run`` follows soon and drains in its own thread (no drain thread per candidate)
        self._ctx = BranchContext(fn, path, limits=limits, _drain_in_wait=True)

    def run(self, timeout: float | None) -> Any:
        try:
            return self._ctx.wait(timeout)
        except TimeoutError as exc:  # BranchContext.wait killed the whole tree already
            raise CandidateTimeout(str(exc)) from None
        except ProcessBranchError as exc:
            raise unwrap(exc) from None
        finally:
            if self._ctx.alive:
                self._ctx.abort()

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self._ctx.abort()


__all__ = [
    "CandidateTimeout",
    "ChildProcessHandle",
    "Handle",
    "SandboxHandle",
    "ThreadHandle",
    "unwrap",
]
