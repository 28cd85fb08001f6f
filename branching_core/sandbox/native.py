"""The caller's side of the native sandbox executor (``native/forkdeck_sandbox.c``).

Sandboxed commands start through a small C program instead of two forks of the
caller's interpreter: the caller ``posix_spawn``s it (a vfork: the caller's size no
longer matters) with the command's fds in place and a request in a memfd; it is the
keeper and the pid-namespace init, speaking ``_spawn``'s protocol (result records,
lifeline, exit status), and performs the same compiled filesystem steps as the Python
init (``steps.run_steps``). Everything is decided here, in Python; the program only
executes. Callables keep the Python path (they run in a fork of their caller).

The binary is built at install time (``setup.py``). When it is missing or cannot be
started, commands take the Python path and a warning is logged once.
``FORKDECK_NATIVE=0`` forces the Python path (tests, debugging);
``FORKDECK_NATIVE_BINARY`` names another build of the executor.

After the first command, executors are pre-started (``native_pool``: a start then
skips ``posix_spawn`` and ``exec``); they are children of this process waiting for a
request, so code counting its children calls ``drain_pool()`` first
(``FORKDECK_NATIVE_POOL=0`` turns the pool off).
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import threading
from collections.abc import Mapping
from pathlib import Path

from branching_core.sandbox import _syscalls as sc
from branching_core.sandbox import native_pool
from branching_core.sandbox.namespaces import SandboxPlan, loopback_up, namespace_flags
from branching_core.sandbox.steps import OPS, Step

log = logging.getLogger(__name__)

ENV_SWITCH = "FORKDECK_NATIVE"
ENV_BINARY = "FORKDECK_NATIVE_BINARY"
BINARY_NAME = "forkdeck-sandbox"
SOURCE = Path(__file__).resolve().parent / "native" / "forkdeck_sandbox.c"
MAGIC = b"forkdeck-sandbox/1"
HOSTNAME = b"forkdeck"

# What a failed posix_spawn of the binary means "not usable here" (then: Python path).
_UNUSABLE = frozenset({errno.ENOENT, errno.EACCES, errno.ENOEXEC, errno.ENOTDIR, errno.EPERM,
                       errno.ELIBBAD, errno.ELOOP})


class NativeUnavailable(Exception):
    """The native executor cannot start this command; the caller takes the Python path."""


def refill() -> None:
    """A command ended: top up the pre-made network namespaces and executors in the
    background (while a command starts, that work would compete with it for the CPU)."""
    _pool.refill()
    native_pool.refill()


def drain_pool() -> None:
    """End and reap the idle pre-started executors (before counting our children)."""
    native_pool.drain()


def binary() -> Path:
    """The executor: ``$FORKDECK_NATIVE_BINARY``, else the one setup.py built beside
    its source."""
    return Path(os.environ.get(ENV_BINARY) or SOURCE.parent / BINARY_NAME)


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").lower() not in ("0", "off", "no", "false")


fallbacks = 0  # commands that took the Python path although native was wanted (tests)


def fell_back(why: str) -> None:
    """Count a fallback; one warning per process (the Python path works, only slower)."""
    global fallbacks
    fallbacks += 1
    if fallbacks == 1:
        log.warning("forkdeck native sandbox unavailable (%s); sandboxed commands take the"
                    " slower Python path", why)


def _s(value: str | bytes | int) -> bytes:
    data = str(value).encode() if isinstance(value, int) else os.fsencode(value)
    return struct.pack("<I", len(data)) + data


def _strings(values: list[bytes] | list[str]) -> bytes:
    return _s(len(values)) + b"".join(_s(v) for v in values)


def encode_step(step: Step) -> bytes:
    kinds = OPS[step.op]
    if len(kinds) != len(step.args):
        raise ValueError(f"step {step.op} takes {len(kinds)} arguments, got {step.args!r}")
    out = [_s(step.op), _s(step.need), _s(step.when), _s(step.when_path),
           _s(int(step.missing_ok))]
    for kind, arg in zip(kinds, step.args, strict=True):
        out.append(_s(int(arg)) if kind == "i" else _s(str(arg)))
    return b"".join(out)


_encoded: dict[int, tuple[tuple[Step, ...], bytes]] = {}


def _encode_steps(steps: tuple[Step, ...]) -> bytes:
    """The steps' encoding, cached by identity (``compile_steps`` shares its lists)."""
    cached = _encoded.get(id(steps))
    if cached is not None and cached[0] is steps:
        return cached[1]
    data = _s(len(steps)) + b"".join(encode_step(step) for step in steps)
    if len(_encoded) >= 32:
        _encoded.clear()
    _encoded[id(steps)] = (steps, data)  # holds the tuple: its id stays unique
    return data


def encode_request(
    plan: SandboxPlan, *, lifeline: int, userns: int, mntns: int, cgroup_procs: list[str],
    keep: list[int], argv: list[str], env: Mapping[str, str], netns: int = -1,
) -> bytes:
    """The request the executor reads (format: the comment at the top of the C file).

    ``netns``: an fd of a fresh network namespace (``lo`` already up) to join instead
    of making one.
    """
    flags = namespace_flags(plan) & ~(sc.CLONE_NEWNET if netns >= 0 else 0)
    loopback = not plan.network and netns < 0
    return b"".join([
        _s(MAGIC), _s(lifeline), _s(userns), _s(mntns), _s(netns),
        _s(flags), _s(int(plan.new_userns)), _s(plan.uid), _s(plan.gid),
        _s(int(loopback)), _s(HOSTNAME),
        _strings(cgroup_procs), _strings([str(fd) for fd in keep]), _strings(argv),
        _strings([f"{k}={v}" for k, v in env.items()]),
        _encode_steps(plan.steps),
    ])


def start(
    plan: SandboxPlan, cgroup_procs: list[str], fd_map: Mapping[int, int], result_w: int,
    lifeline_r: int, argv: list[str], env: Mapping[str, str],
) -> int:
    """``posix_spawn`` the executor for ``argv``; returns its pid (the keeper).

    ``fd_map`` maps each of the command's fds to the caller's fd it must be. Raises
    ``NativeUnavailable`` when the binary is missing or cannot run (nothing started).
    """
    path = binary()
    targets = sorted(fd_map)
    idle = native_pool.pool().take(path) if native_pool.enabled() else None
    netns = _pool.take() if _pooled(plan) else None
    controls = [result_w, lifeline_r, *plan.child_fds, *([netns] if netns is not None else [])]
    memfd = os.memfd_create("forkdeck-sandbox-request", os.MFD_CLOEXEC)
    try:
        # Every source first goes above every fd involved, then targets take their
        # numbers: a target may be another source's current number.
        sources = [memfd, *controls, *(fd_map[t] for t in targets)]
        base = max([2, *sources, *targets]) + 1
        high = {fd: base + i for i, fd in enumerate(sources)}
        request = encode_request(
            plan, lifeline=high[lifeline_r],
            userns=high[plan.userns_fd] if plan.userns_fd is not None else -1,
            mntns=high[plan.mntns_fd] if plan.mntns_fd is not None else -1,
            netns=high[netns] if netns is not None else -1,
            cgroup_procs=cgroup_procs, keep=targets, argv=argv, env=env,
        )
        view = memoryview(request)
        while view:
            view = view[os.write(memfd, view):]
        if idle is not None and len(sources) <= native_pool.MAX_PASSED:
            # A pre-started one: the same fds at the same numbers, by SCM_RIGHTS.
            sent, idle = idle.send(sources, [high[fd] for fd in (memfd, *controls)] + targets), None
            if sent is not None:
                return sent
        actions = [(os.POSIX_SPAWN_DUP2, fd, base + i) for i, fd in enumerate(sources)]
        first = 1 + len(controls)
        actions += [(os.POSIX_SPAWN_DUP2, base + first + i, t) for i, t in enumerate(targets)]
        try:
            return os.posix_spawn(
                path, [BINARY_NAME, str(high[memfd]), str(high[result_w])],
                {"PATH": os.environ.get("PATH", os.defpath)},  # the command's PATH search
                file_actions=actions, setsigmask=(),
            )
        except OSError as exc:
            if exc.errno in _UNUSABLE:
                raise NativeUnavailable(f"{path}: {exc.strerror}") from exc
            raise
    finally:
        if idle is not None:
            idle.discard()
        os.close(memfd)
        if netns is not None:  # the executor has its copy (or never ran): used once
            os.close(netns)


def _pooled(plan: SandboxPlan) -> bool:
    """Whether this sandbox can join a pre-made network namespace: a private network
    made by a root caller in its own user namespace (else the new user namespace must
    own the network namespace, so the executor makes it)."""
    return (not plan.network and not plan.new_userns and plan.userns_fd is None
            and os.geteuid() == 0)


class _NetnsPool:
    """A few fresh, empty network namespaces, made ahead by a background thread.

    Making a network namespace is the dearest part of a sandbox's start (~0.5 ms of
    kernel time in ``unshare``, and bringing ``lo`` up waits for the kernel's lock of
    network configuration, which the teardown of earlier namespaces holds); a thread of
    the caller makes the next ones once a command has ended. Each is handed to exactly one
    sandbox (popped under the lock) and nothing else ever runs in it: the thread enters
    it only to bring ``lo`` up and open its ns file, then returns to its own. When the
    pool is empty the executor makes its own, as before.
    """

    SIZE = 2

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready: list[int] = []
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.broken = False
        self.wanted = False  # a root caller's sandbox took one: keep SIZE ready

    def take(self) -> int | None:
        with self.lock:
            if self.thread is None and not self.broken:
                self.thread = threading.Thread(target=self._fill, daemon=True,
                                               name="forkdeck-netns-pool")
                self.thread.start()
            fd = self.ready.pop() if self.ready else None
            self.wanted = True
        return fd

    def refill(self) -> None:
        """Make the next ones now (as a command ends: not competing with its start)."""
        if self.wanted and len(self.ready) < self.SIZE:
            self.wake.set()

    def _fill(self) -> None:
        try:
            home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.broken = True
            return
        while not self.broken:
            self.wake.wait()
            self.wake.clear()
            while len(self.ready) < self.SIZE and not self.broken:
                try:
                    sc.unshare(sc.CLONE_NEWNET)  # this thread only: namespaces are per task
                except OSError:
                    self.broken = True
                    return
                try:
                    loopback_up()
                    fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    fd = -1
                try:
                    sc.setns(home, sc.CLONE_NEWNET)
                except OSError:  # stuck elsewhere: stop making them (this thread only)
                    self.broken = True
                if fd < 0 or self.broken:
                    if fd >= 0:
                        os.close(fd)
                    self.broken = True
                    return
                with self.lock:
                    self.ready.append(fd)


_pool = _NetnsPool()


def _new_pool_in_child() -> None:
    """A fork has no pool thread; its copies of the pooled fds are not its to use."""
    global _pool
    for fd in _pool.ready:
        try:
            os.close(fd)
        except OSError:
            pass
    _pool = _NetnsPool()


os.register_at_fork(after_in_child=_new_pool_in_child)


__all__ = ["ENV_BINARY", "ENV_SWITCH", "NativeUnavailable", "binary", "drain_pool", "enabled",
           "encode_request", "fell_back", "start"]
