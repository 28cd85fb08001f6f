# pyright: strict
"""One fork per sandbox: the caller's forking thread (``_spawn``'s docstring, "one fork").

A sandbox of a privileged caller (root in its own user namespace) needs no keeper
process between the caller and the pid-namespace init. One long-lived thread of the
caller does, for each sandbox, ``unshare(CLONE_NEWPID)`` (which changes only the pid
namespace *its* next child is born in), ``fork()``, and ``setns`` back to its own pid
namespace: the child is pid 1 of a fresh pid namespace straight away. The keeper's two
jobs move to the kernel and the caller:

* **Caller death**: the init sets ``PR_SET_PDEATHSIG=SIGKILL``. That signal follows the
  *thread* that forked, which is why every such fork is made by this one thread, and
  it lives as long as the process (a worker thread's exit would kill the sandbox).
  SIGKILL of the init ends its whole pid namespace.
* **Abort, timeout**: the caller signals the init through its pidfd (it is a child of
  this process, so the pidfd also reaps it; no pid can be reused meanwhile).

Anything else (a caller without ``CAP_SYS_ADMIN``, one whose sandbox needs a user
namespace of its own or of a view helper) gets ``None`` from ``fork`` and forks a keeper
as before. ``FORKDECK_ONE_FORK=0`` forces the keeper (tests run both shapes).
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import signal
import threading
from collections.abc import Callable
from typing import NoReturn

from branching_core.sandbox import _syscalls as sc

ENV_ONE_FORK = "FORKDECK_ONE_FORK"

Body = Callable[[], NoReturn]


def wanted() -> bool:
    """Whether sandboxes may take the one-fork shape (``FORKDECK_ONE_FORK``, default on)."""
    return os.environ.get(ENV_ONE_FORK, "1").lower() not in ("0", "off", "no", "false")


class _Request:
    __slots__ = ("abandoned", "body", "done", "error", "lock", "pid")

    def __init__(self, body: Body) -> None:
        self.body = body
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.pid: int | None = None
        self.error: BaseException | None = None
        self.abandoned = False


class Forker:
    """The thread that forks sandbox inits into new pid namespaces (see the module doc)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.home = -1  # our own pid namespace: where the thread returns after each fork
        self.unusable: str | None = None  # why this process cannot (then: keepers)
        self.forks = 0  # inits forked this way (tests)

    def fork(self, body: Body) -> int | None:
        """Run ``body`` in a child that is pid 1 of a new pid namespace; its pid.

        ``None`` when this process cannot make pid namespaces (nothing was started).
        Raises ``OSError`` when ``fork`` itself fails.
        """
        if self.unusable is not None or not self._started():
            return None
        req = _Request(body)
        self.requests.put(req)
        try:
            while not req.done.wait(0.5):
                pass
        except BaseException:
            # Interrupted (^C) while the thread forks: whatever it started is killed and
            # reaped (here or by the thread), never left running without its caller.
            with req.lock:
                req.abandoned = True
                pid, req.pid = req.pid, None
            if pid is not None:
                _kill_and_reap(pid)
            raise
        if req.error is not None:
            raise req.error
        return req.pid

    def _started(self) -> bool:
        with self.lock:
            if self.thread is not None:
                return True
            if self.unusable is not None:
                return False
            try:
                self.home = os.open("/proc/thread-self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                self.unusable = f"cannot open our pid namespace: {exc.strerror}"
                return False
            self.thread = threading.Thread(target=self._run, daemon=True,
                                           name="forkdeck-sandbox-forker")
            self.thread.start()
            return True

    def _run(self) -> None:
        while True:
            req = self.requests.get()
            if req is None:
                return
            try:
                pid = self._fork_one(req.body)
            except BaseException as exc:
                req.error = exc
                pid = None
            with req.lock:
                if req.abandoned and pid is not None:
                    _kill_and_reap(pid)
                else:
                    req.pid = pid
            req.done.set()

    def _fork_one(self, body: Body) -> int | None:
        """In the thread: a new pid namespace for the next child, the fork, and back."""
        try:
            sc.unshare(sc.CLONE_NEWPID)
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EINVAL, errno.ENOSPC, errno.EUSERS):
                self.unusable = f"unshare(CLONE_NEWPID): {exc.strerror}"
                return None
            raise
        try:
            pid = os.fork()
        except BaseException:
            self._home()
            raise
        if pid == 0:  # pragma: no cover - runs in the child (pid 1 of its namespace)
            try:
                body()
            finally:
                os._exit(127)
        self.forks += 1
        self._home()
        return pid

    def _home(self) -> None:
        """Children of this thread are born in our own pid namespace again (and the
        next ``unshare`` may make a new one: it must start from the active one)."""
        try:
            sc.setns(self.home, sc.CLONE_NEWPID)
        except OSError as exc:  # the next unshare would fail: keepers from now on
            self.unusable = f"setns back to our pid namespace: {exc.strerror}"


def _kill_and_reap(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


_forker = Forker()


def forker() -> Forker:
    return _forker


def _new_forker_in_child() -> None:
    """A fork has no forking thread: its own is made on first use; the parent's pid
    namespace fd is not its to keep (nor a sandbox's to hold)."""
    global _forker
    if _forker.home >= 0:
        with contextlib.suppress(OSError):
            os.close(_forker.home)
    _forker = Forker()


os.register_at_fork(after_in_child=_new_forker_in_child)


__all__ = ["ENV_ONE_FORK", "Forker", "forker", "wanted"]
