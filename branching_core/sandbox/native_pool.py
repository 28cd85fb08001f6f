# pyright: strict
"""Pre-started native executors: a sandboxed command skips ``posix_spawn`` and ``exec``.

Starting the executor (``posix_spawn``, ``exec`` of a static binary, reaching ``main``)
was ~1.4 ms of a sandboxed command's start on a busy 2-core machine. After the first
sandboxed command, a background thread keeps ``SIZE`` executors already started and
blocked reading a ``SOCK_SEQPACKET`` socket (``forkdeck-sandbox --wait``); a command
then sends one of them its request and fds (``SCM_RIGHTS``) and it goes on exactly as a
freshly spawned one. The thread has the next one made once a command has ended (made
while a command starts, it would compete with that start for the CPU).

The thread never forks or spawns anything itself: a *spawner* (``forkdeck-sandbox
--spawner``, started by a caller's thread in ``take``, synchronously) makes them, cloned
with ``CLONE_PARENT`` so that they are still this process's children (each a fork of the
spawner that goes on as ``--wait``, not an exec of the binary: ~0.4 ms of CPU less per
command). A fork or spawn by a thread of ours copies every fd of this process,
close-on-exec ones included, into the child until its ``exec``: a refill spawned at a
command's end held, for that moment, a copy of a fd the caller had passed to the command
and closed on its return (the pipe did not read as closed:
``test_nothing_of_the_command_runs_once_it_has_returned``). The spawner holds none of
the caller's fds, and a caller's own thread spawns only while it waits for that spawn,
before its command has even started.

Guarantees:

* An idle executor never outlives its owner: only the owner holds the other end of its
  socket (close-on-exec, and closed in every ``os.fork`` child by an at-fork handler),
  so the owner's exit or death, even by SIGKILL, is EOF for it and it exits at once.
* Each is handed to exactly one request (popped under the lock), and a fork child
  never uses its parent's (its pool starts empty).
* ``drain()`` ends and reaps the idle ones: code that counts this process's children
  (leak checks) calls it first, as it calls ``workspace.reaper.drain``. They are
  children of ours, named ``forkdeck-sandbox --wait``.
* A command runs with exactly the attributes its caller has when it asks: executors
  inherit the spawner's (``caller_attrs``: rlimits, cgroup, uids and gids, and the
  starting thread's CPU affinity and nice value), which are those of the caller's
  thread that started it; one is handed only to a caller that has the same ones now.
  Otherwise the others are let go, the command is started afresh, as with the pool off,
  and that caller's thread starts a new spawner (the old one ends). The owner's umask
  and ``PATH`` are taken at each use, and it waits in ``/``.

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

_WAIT_FD = 3  # the socket's number in a waiting executor (and in the spawner)
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


class Spawner:
    """``forkdeck-sandbox --spawner``: makes waiting executors on request (see the
    module's docstring for why not this process). Started in a caller's thread only."""

    def __init__(self, binary: str, pid: int, sock: int, attrs: caller_attrs.Attributes) -> None:
        self.binary, self.pid, self.sock, self.attrs = binary, pid, sock, attrs
        self.broken = False  # it ended or failed a request: a caller starts another
        self.made = 0  # executors it made (none before breaking: not a spawner at all)

    @classmethod
    def start(cls, path: str) -> Spawner | None:
        """``posix_spawn`` one in the calling thread (which waits for its ``exec``: no
        copy of this process's fds outlives this call); None if it cannot be started.

        Its attributes are read before the spawn: a change made meanwhile then makes the
        record differ from the caller's (its executors are let go), never the other way."""
        attrs = caller_attrs.current()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        mine = ours.detach()
        _OURS.add(mine)
        child = fcntl.fcntl(theirs.fileno(), fcntl.F_DUPFD_CLOEXEC, _WAIT_FD + 1)
        _OURS.add(child)
        theirs.close()
        try:
            pid = os.posix_spawn(
                path, ["forkdeck-sandbox", "--spawner", str(_WAIT_FD)],
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
        return cls(path, pid, mine, attrs)

    def spawn(self) -> Idle | None:
        """One more waiting executor (a child of ours), or None (then ``broken``)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=self.sock)
        try:
            sock.send(b"F", socket.MSG_NOSIGNAL)
            text, ancillary, _, _ = sock.recvmsg(32, socket.CMSG_SPACE(4),
                                                 socket.MSG_CMSG_CLOEXEC)
        except OSError:
            self.broken = True
            return None
        finally:
            sock.detach()
        fds = [fd for level, kind, data in ancillary
               if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
               for fd in array.array("i", data[:len(data) - len(data) % 4])]
        for fd in fds:
            _OURS.add(fd)
        if len(fds) != 1 or not text.isdigit():
            for fd in fds:
                _OURS.discard(fd)
                os.close(fd)
            self.broken = True
            return None
        self.made += 1
        return Idle(self.binary, int(text), fds[0], self.attrs)

    def end(self) -> None:
        """Let it go (EOF ends it) and reap it."""
        fd, self.sock = self.sock, -1
        if fd >= 0:
            _OURS.discard(fd)
            os.close(fd)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)


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
        self.spawner: Spawner | None = None  # what makes them (started in ``take``)
        self.retired: list[Spawner] = []  # spawners to end once the filler is not busy
        self.unstartable: tuple[str, caller_attrs.Attributes] | None = None  # (failed)
        self.starting = threading.Lock()  # one caller starts a spawner, the others go on

    def take(self, binary: Path, key: str | None = None) -> Idle | None:
        """An idle executor of ``binary`` that pre-built the sandbox ``key`` names, or
        one that built nothing, or None. Those built for another sandbox are let go:
        a pre-built sandbox is only ever used for a request with the same key."""
        path = str(binary)
        stale: list[Idle] = []
        now = caller_attrs.current()
        self._ensure_spawner(path, now)
        with self.lock:
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

    def _ensure_spawner(self, path: str, now: caller_attrs.Attributes) -> None:
        """A spawner of ``path`` with the caller's attributes ``now``: started here, in
        the caller's thread, when there is none (the first command, or the caller's
        attributes changed); the one it replaces ends once the filler is not using it."""
        spawner = self.spawner
        if (spawner is not None and not spawner.broken and spawner.binary == path
                and spawner.attrs == now) or self.unstartable == (path, now):
            return
        if (spawner is not None and spawner.broken and not spawner.made
                and spawner.binary == path and spawner.attrs == now):
            self.unstartable = (path, now)  # e.g. an older build without --spawner: the
            return                          # commands start their own, as with no pool
        if not self.starting.acquire(blocking=False):
            return  # another caller starts one (this command starts its own executor)
        try:
            new = Spawner.start(path)
            with self.lock:
                old, self.spawner = self.spawner, new
                if old is not None:
                    self.retired.append(old)
                # None: the command's own posix_spawn says why; not tried again as is
                self.unstartable = (path, now) if new is None else None
                ended = self._take_retired()
        finally:
            self.starting.release()
        for one in ended:
            one.end()

    def _take_retired(self) -> list[Spawner]:
        """The retired spawners nobody uses now (under ``lock``)."""
        if self.busy:
            return []
        ended, self.retired = self.retired, []
        return ended

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
        """End and reap every idle executor and the spawner (the next command may start
        new ones)."""
        with self.lock:
            self.wanted = 0
            self.lock.wait_for(lambda: not self.busy, timeout=30)
            idle, self.ready = self.ready, []
            if self.spawner is not None:
                self.retired.append(self.spawner)
                self.spawner = None
            ended = self._take_retired()
        for one in idle:
            one.discard()
        for spawner in ended:
            spawner.end()

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
        """Have one more made if one is wanted; whether to go on."""
        with self.lock:
            path = self.binary
            ended = self._take_retired()
            spawner = self.spawner
            if (len(self.ready) >= self.wanted or spawner is None or spawner.broken
                    or spawner.binary != path):
                spawner = None  # none to ask: the next take starts one
            else:
                self.busy = True
            prebuild = self.prebuild
        for one in ended:
            one.end()
        if spawner is None:
            return False
        idle: Idle | None = None
        try:
            idle = spawner.spawn()
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
