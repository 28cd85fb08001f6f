# pyright: strict
"""Pre-started native executors: a sandboxed command skips ``posix_spawn`` and ``exec``.

Starting the executor (``posix_spawn``, ``exec`` of a static binary, reaching ``main``)
was ~1.4 ms of a sandboxed command's start on a busy 2-core machine. After the first
sandboxed command, a background thread keeps ``SIZE`` executors already started and
blocked reading a ``SOCK_SEQPACKET`` socket (``forkdeck-sandbox --wait``); a command
then sends one of them its request and fds (``SCM_RIGHTS``) and it goes on exactly as a
freshly spawned one. The thread makes the next one once a command has ended (made
while a command starts, it would compete with that start for the CPU).

Guarantees:

* An idle executor never outlives its owner: only the owner holds the other end of its
  socket (close-on-exec, and closed in every ``os.fork`` child by an at-fork handler),
  so the owner's exit or death, even by SIGKILL, is EOF for it and it exits at once.
* Each is handed to exactly one request (popped under the lock), and a fork child
  never uses its parent's (its pool starts empty).
* ``drain()`` ends and reaps the idle ones: code that counts this process's children
  (leak checks) calls it first, as it calls ``workspace.reaper.drain``. They are
  children of ours, named ``forkdeck-sandbox --wait``.
* A command runs with exactly the attributes its caller has when it asks: an executor
  records the ones it was started with (``caller_attrs``: rlimits, cgroup, uids and
  gids, and the starting thread's CPU affinity and nice value) and is handed only to a
  caller that has the same ones now; the others are let go and the command is started
  afresh, as with the pool off. The thread adopts the last caller's affinity and nice
  value before starting the next ones (it starts none it cannot give them). The
  owner's umask and ``PATH`` are taken at each use, and it waits in ``/``.

Each idle executor may carry a pre-built sandbox (``Prebuild``, sent by this thread
right after starting it, for the last command's plan); ``take(binary, key)`` hands out
only one built for ``key`` (or one that built nothing) and lets the others go, and stops
building ahead for another key at once (under the same lock): the filler never adds
one built for a sandbox the last request did not ask for.

``FORKDECK_NATIVE_POOL=0`` turns it off (each command then ``posix_spawn``s its own).
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import socket
import threading
from pathlib import Path
from typing import Protocol

from branching_core.sandbox import caller_attrs

ENV_POOL = "FORKDECK_NATIVE_POOL"

_WAIT_FD = 3  # the socket's number in a waiting executor
MAX_PASSED = 250  # fds one request may pass (the kernel's SCM_RIGHTS limit is 253)


def pool_enabled() -> bool:
    return os.environ.get(ENV_POOL, "1").lower() not in ("0", "off", "no", "false")


class Idle:
    """One waiting executor: its pid, our end of its socket, and the key of the sandbox
    it has pre-built (None: nothing built)."""

    __slots__ = ("attrs", "binary", "key", "pid", "sock")

    def __init__(self, binary: str, pid: int, sock: int,
                 attrs: caller_attrs.Attributes | None = None) -> None:
        self.binary, self.pid, self.sock = binary, pid, sock
        self.key: str | None = None
        self.attrs = attrs  # what it inherited when started (None: unknown, never handed out)

    def post(self, head: str, fds: list[int], targets: list[int], tail: str = "") -> bool:
        """One message: ``head`` (a first line, or ""), the fds' numbers, ``tail``."""
        text = head + " ".join(map(str, targets)) + tail
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=self.sock)
        try:
            sock.sendmsg([os.fsencode(text)],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                           array.array("i", fds).tobytes())],
                         socket.MSG_NOSIGNAL)
            return True
        except OSError:
            return False
        finally:
            sock.detach()

    def send(self, fds: list[int], targets: list[int], head: str = "") -> int | None:
        """Hand it the request; its pid, or None when it is gone (then it is reaped)."""
        sent = self.post(head, fds, targets, "\n" + os.environ.get("PATH", os.defpath))
        if not sent:
            self.discard()
            return None
        self.close()
        return self.pid

    def ended(self) -> bool:
        """Whether it has exited (then it is reaped here): one that let its pre-built
        sandbox go (its mounts changed) is not handed a request."""
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == self.pid
        except ChildProcessError:
            return True

    def close(self) -> None:
        fd, self.sock = self.sock, -1
        if fd >= 0:
            _OURS.discard(fd)
            os.close(fd)

    def discard(self) -> None:
        """Let it go (EOF ends it) and reap it."""
        self.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


# Every socket end of ours, for the at-fork handler (added as soon as it exists).
_OURS: set[int] = set()


class Prebuild(Protocol):
    """What the next executors pre-build (``native.py`` makes it from the last
    command's plan): ``prime`` sends an idle executor the pre-build message."""

    key: str

    def prime(self, idle: Idle) -> bool: ...


class Pool:
    """Up to ``SIZE`` idle executors, made by a background thread after each take."""

    SIZE = 2

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.ready: list[Idle] = []
        self.wanted = 0  # SIZE after a take, 0 after a drain (nothing refills it then)
        self.busy = False  # the filler is starting one (drain waits for it)
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.binary = ""
        self.spawned = 0  # executors this pool started (tests)
        self.prebuild: Prebuild | None = None  # the last command's sandbox, built ahead
        self.prebuilt = 0  # executors sent a pre-build (tests)
        self.stale = 0  # executors let go because their caller's attributes changed (tests)
        self.thread_attrs: caller_attrs.ThreadAttributes | None = None  # the last caller's

    def take(self, binary: Path, key: str | None = None) -> Idle | None:
        """An idle executor of ``binary`` that pre-built the sandbox ``key`` names, or
        one that built nothing, or None. Those built for another sandbox are let go:
        a pre-built sandbox is only ever used for a request with the same key."""
        path = str(binary)
        stale: list[Idle] = []
        now = caller_attrs.current()
        with self.lock:
            self.thread_attrs = now.thread
            if path != self.binary:
                stale, self.ready, self.binary = self.ready, [], path
            changed = [i for i in self.ready if i.attrs != now]  # started as another caller
            self.stale += len(changed)
            stale += changed
            self.ready = [i for i in self.ready if i.attrs == now]
            if self.thread is None:
                self.thread = threading.Thread(target=self._fill, daemon=True,
                                               name="forkdeck-executor-pool")
                self.thread.start()
            live = [i for i in self.ready if not i.ended()]
            gone = [i for i in self.ready if i not in live]
            usable = [i for i in live if i.key is None or i.key == key]
            stale += [i for i in live if not (i.key is None or i.key == key)]
            usable.sort(key=lambda i: i.key is None)  # pre-built ones first
            idle = usable.pop(0) if usable else None
            self.ready = usable
            self.wanted = self.SIZE
            if self.prebuild is not None and self.prebuild.key != key:
                # A command for another sandbox: the filler must not go on building the
                # last one ahead between this take and the caller's ``remember``.
                self.prebuild = None
        for old in stale:
            old.discard()
        for dead in gone:
            dead.close()
        return idle

    def remember(self, prebuild: Prebuild | None) -> None:
        """What executors pre-build from the next refill on (the last command's
        sandbox; those waiting that built nothing build it then too)."""
        with self.lock:
            self.prebuild = prebuild

    def refill(self) -> None:
        """Make the next ones now (called as a command ends: starting an executor while
        a command starts would compete with it for the CPU)."""
        if self.wanted:  # the thread also drops ended ones and primes idle ones
            self.wake.set()

    def idle_pids(self) -> list[int]:
        with self.lock:
            return [idle.pid for idle in self.ready]

    def drain(self) -> None:
        """End and reap every idle executor (the next command may start new ones)."""
        with self.lock:
            self.wanted = 0
            self.lock.wait_for(lambda: not self.busy, timeout=30)
            idle, self.ready = self.ready, []
        for one in idle:
            one.discard()

    def _fill(self) -> None:
        while True:
            self.wake.wait()
            self.wake.clear()
            self._prime_waiting()
            while self._fill_one():
                pass

    def _prime_waiting(self) -> None:
        """Have the idle executors that built nothing build the sandbox now wanted.

        Each is out of ``ready`` while its pre-build is sent (a request must never reach
        an executor between the two), and goes back only if still wanted.
        """
        with self.lock:
            ended = [i for i in self.ready if i.ended()]  # let their sandbox go
            self.ready = [i for i in self.ready if i not in ended]
            prebuild = self.prebuild
            todo = [i for i in self.ready if i.key is None] if prebuild is not None else []
            self.ready = [i for i in self.ready if i not in todo]
            self.busy = bool(todo)
        for idle in ended:
            idle.close()
        if not todo:
            return
        keep: list[Idle] = []
        assert prebuild is not None
        try:
            for idle in todo:
                if prebuild.prime(idle):
                    idle.key = prebuild.key
                    self.prebuilt += 1
                    keep.append(idle)
                else:
                    idle.discard()
        finally:
            with self.lock:
                self.busy = False
                self.lock.notify_all()
                back = self.wanted > 0 and self.prebuild is prebuild
                if back:
                    self.ready.extend(keep)
            if not back:
                for idle in keep:
                    idle.discard()

    def _fill_one(self) -> bool:
        """Start one more if one is wanted; whether to go on."""
        with self.lock:
            path = self.binary
            if len(self.ready) >= self.wanted:
                return False
            self.busy = True
            prebuild = self.prebuild
            wanted = self.thread_attrs
        idle: Idle | None = None
        try:
            if wanted is not None and not caller_attrs.adopt(wanted):
                return False  # one started now would not serve that caller: start none
            idle = _start(path)
            if idle is not None and prebuild is not None and prebuild.prime(idle):
                idle.key = prebuild.key
                self.prebuilt += 1
        finally:
            with self.lock:
                self.busy = False
                self.lock.notify_all()
                current = self.prebuild
                wanted_key = None if current is None else current.key
                if (idle is not None and path == self.binary and self.wanted
                        and idle.key in (None, wanted_key)):  # built for a sandbox no
                    self.ready.append(idle)                   # longer wanted: let it go
                    self.spawned += 1
                    idle, kept = None, True
                else:  # not startable (the command's own posix_spawn says why), or stale
                    kept = False
        if idle is not None:
            idle.discard()
        return kept


def _start(path: str) -> Idle | None:
    """posix_spawn one waiting executor; None if it cannot be started.

    Its attributes are read before the spawn: a change made meanwhile then makes the
    record differ from the caller's (the executor is let go), never the other way."""
    attrs = caller_attrs.current()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    mine = ours.detach()
    _OURS.add(mine)
    child = fcntl.fcntl(theirs.fileno(), fcntl.F_DUPFD_CLOEXEC, _WAIT_FD + 1)
    _OURS.add(child)
    theirs.close()
    try:
        pid = os.posix_spawn(
            path, ["forkdeck-sandbox", "--wait", str(_WAIT_FD)],
            {"PATH": os.environ.get("PATH", os.defpath)},
            file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0),
                          (os.POSIX_SPAWN_DUP2, 0, 1), (os.POSIX_SPAWN_DUP2, 0, 2),
                          (os.POSIX_SPAWN_DUP2, child, _WAIT_FD)],
            setsigmask=(),
        )
    except OSError:
        _OURS.discard(mine)
        os.close(mine)
        return None
    finally:
        _OURS.discard(child)
        os.close(child)
    return Idle(path, pid, mine, attrs)


_pool = Pool()


def pool() -> Pool:
    return _pool


def refill() -> None:
    """A command ended: top the pool up in the background."""
    _pool.refill()


def drain_executors() -> None:
    """End and reap this process's idle executors (before counting its children)."""
    _pool.drain()


def _new_pool_in_child() -> None:
    """A fork child's copies of the sockets are not its to use: closing them keeps the
    parent's EOF (and so its executors' lifetime) the parent's alone."""
    global _pool
    for fd in tuple(_OURS):
        with contextlib.suppress(OSError):
            os.close(fd)
    _OURS.clear()
    _pool = Pool()


os.register_at_fork(after_in_child=_new_pool_in_child)


__all__ = ["ENV_POOL", "Idle", "Pool", "Prebuild", "drain_executors", "pool", "pool_enabled"]
