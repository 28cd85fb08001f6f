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
  delay a finished candidate behind a slower one.
* ``SandboxHandle`` is the sandbox's ``BranchContext`` (namespaces, cgroup limits,
  whole-tree kill).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from branching_core.errors import ProcessBranchError

_FORK_LOCK = threading.Lock()
_HEADER = struct.Struct("<QQ")


class CandidateTimeout(Exception):
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
    """Run ``fn(path)`` in a plain forked child in its own process group."""

    def __init__(self, fn: Callable[[Path], Any], path: Path) -> None:
        from branching_core.sandbox.results import encode_exception, encode_value

        self._done = threading.Event()
        self._data = bytearray()
        r, w = os.pipe2(os.O_CLOEXEC)
        with _FORK_LOCK:  # no sibling fork can inherit ``w`` between fork and close
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child
                code = 0
                try:
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
                    os._exit(code)
            os.close(w)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # the child does it too; whichever runs first wins
        self.pid = pid
        self._pidfd = os.pidfd_open(pid)
        self._r = r
        self._status = 0
        self._lock = threading.Lock()
        self._reaped = False
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        os.set_blocking(self._r, False)
        try:
            while True:
                ready, _, _ = select.select([self._r, self._pidfd], [], [])
                if self._r in ready and self._read_available() is None:
                    # EOF: wait for the exit itself (pipe EOF alone proves nothing).
                    select.select([self._pidfd], [], [])
                    break
                if self._pidfd in ready:
                    self._read_available()
                    break
        finally:
            with self._lock:
                # Whatever the candidate left running in its group dies with it.
                with contextlib.suppress(OSError):
                    os.killpg(self.pid, signal.SIGKILL)
                _, self._status = os.waitpid(self.pid, 0)
                self._reaped = True
                os.close(self._r)
                os.close(self._pidfd)
            self._done.set()

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

        if not self._done.wait(timeout):
            self.kill()
            self._done.wait()
            raise CandidateTimeout(f"did not finish within {timeout} s; killed")
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

    def __init__(self, fn: Callable[[Path], Any], path: Path, limits: Any) -> None:
        from branching_core.sandbox import BranchContext

        self._ctx = BranchContext(fn, path, limits=limits)

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
