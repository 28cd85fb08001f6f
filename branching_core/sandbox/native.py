# pyright: strict
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

For a root caller, those executors also pre-build the sandbox of the last command
(``_Prebuild``: namespaces, init, every compiled step), and a request whose freshly
computed ``plan_key`` is the same only joins its cgroups, hands over its fds and spawns.
Anything else (another branch, a plan changed by a new socket or secret, a view replaced
at the same path, a mount of the built sandbox detached by the host) gets a sandbox
built for it as before: a pre-built sandbox is never used for another plan.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import logging
import os
import resource
import struct
import threading
from collections.abc import Mapping
from pathlib import Path

from branching_core.errors import BranchingError, InvalidArgumentError, SystemCallError
from branching_core.sandbox import _syscalls as sc
from branching_core.sandbox import masks, native_pool
from branching_core.sandbox.namespaces import SandboxPlan, loopback_up, namespace_flags
from branching_core.sandbox.steps import OPS, CompiledSteps, SandboxStep

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


class NativeUnavailable(BranchingError):
    """The native executor cannot start this command; the caller takes the Python path."""


def refill() -> None:
    """A command ended: top up the pre-made network namespaces and executors in the
    background (while a command starts, that work would compete with it for the CPU)."""
    _pool.refill()
    native_pool.refill()




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


def encode_step(step: SandboxStep) -> bytes:
    kinds = OPS[step.op]
    if len(kinds) != len(step.args):
        raise InvalidArgumentError(
            f"step {step.op} takes {len(kinds)} arguments, got {step.args!r}"
        )
    out = [_s(step.op), _s(step.need), _s(step.when), _s(step.when_path),
           _s(int(step.missing_ok))]
    for kind, arg in zip(kinds, step.args, strict=True):
        out.append(_s(int(arg)) if kind == "i" else _s(str(arg)))
    return b"".join(out)


_encoded: dict[int, tuple[tuple[SandboxStep, ...], bytes, str]] = {}


def _encode_steps(steps: tuple[SandboxStep, ...]) -> tuple[bytes, str]:
    """The steps' encoding and its digest, cached by identity (``compile_steps``
    shares its lists, and the parts of a list that other views share)."""
    cached = _encoded.get(id(steps))
    if cached is not None and cached[0] is steps:
        return cached[1], cached[2]
    data = _s(len(steps)) + _encode_part(steps)
    digest = hashlib.sha256(data).hexdigest()
    if len(_encoded) >= 32:
        _encoded.clear()
    _encoded[id(steps)] = (steps, data, digest)  # holds the tuple: its id stays unique
    return data, digest


_parts: dict[int, tuple[tuple[SandboxStep, ...], bytes]] = {}


def _encode_part(steps: tuple[SandboxStep, ...]) -> bytes:
    """The steps one after the other (no count), a shared part encoded once."""
    if isinstance(steps, CompiledSteps):
        return b"".join(_encode_part(part) if len(part) > 8
                        else b"".join(encode_step(step) for step in part)  # a view's own
                        for part in steps.parts)
    cached = _parts.get(id(steps))
    if cached is not None and cached[0] is steps:
        return cached[1]
    data = b"".join(encode_step(step) for step in steps)
    if len(_parts) >= 64:
        _parts.clear()
    _parts[id(steps)] = (steps, data)
    return data


_env_cache: tuple[tuple[tuple[str, str], ...], bytes] | None = None


def _encode_env(env: Mapping[str, str]) -> bytes:
    """The environment's part of a request; the last one is kept (a caller's commands
    mostly share its environment: ~40 entries encoded once, not per command)."""
    global _env_cache
    items = tuple(env.items())
    cached = _env_cache
    if cached is not None and cached[0] == items:
        return cached[1]
    data = _strings([f"{k}={v}" for k, v in items])
    _env_cache = (items, data)
    return data


def encode_request(
    plan: SandboxPlan, *, lifeline: int, userns: int, mntns: int, cgroup_procs: list[str],
    keep: list[int], argv: list[str], env: Mapping[str, str], netns: int = -1,
    steps: bool = True,
) -> bytes:
    """The request the executor reads (format: the comment at the top of the C file).

    ``netns``: an fd of a fresh network namespace (``lo`` already up) to join instead
    of making one. ``steps=False``: none (a pre-built sandbox already ran them).
    """
    flags = namespace_flags(plan) & ~(sc.CLONE_NEWNET if netns >= 0 else 0)
    loopback = not plan.network and netns < 0
    return b"".join([
        _s(MAGIC), _s(lifeline), _s(userns), _s(mntns), _s(netns),
        _s(flags), _s(int(plan.new_userns)), _s(plan.uid), _s(plan.gid),
        _s(int(loopback)), _s(HOSTNAME),
        _strings(cgroup_procs), _strings([str(fd) for fd in keep]), _strings(argv),
        _encode_env(env),
        _encode_steps(plan.steps)[0] if steps else _s(0),
    ])


def fill_request(read_fd: int, write_fd: int, request: bytes, name: str) -> None:
    """Put ``request`` behind ``read_fd`` (a pipe's read end) and close ``write_fd``.

    A memfd put at ``read_fd``'s number, as a rule. When the caller's ``RLIMIT_FSIZE`` is
    smaller than the request (writing a memfd is subject to it: a limit of a few kB made
    every command fail with "File too large"), the pipe itself, filled and closed before
    the executor reads it to EOF (a pipe is not subject to the limit)."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        fits = soft == resource.RLIM_INFINITY or soft >= len(request)
        if not fits and len(request) > 65536:
            with contextlib.suppress(OSError):
                fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, len(request))
        if not fits and len(request) <= fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ):
            view = memoryview(request)
            while view:
                view = view[os.write(write_fd, view):]
            return
        memfd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            view = memoryview(request)
            while view:
                try:
                    view = view[os.write(memfd, view):]
                except OSError as exc:
                    if exc.errno == errno.EFBIG:
                        raise SystemCallError(errno.EFBIG, (
                            f"the sandbox request ({len(request)} bytes) exceeds this"
                            " process's file-size limit (RLIMIT_FSIZE) and its pipe size"
                        )) from exc
                    raise
            os.dup2(memfd, read_fd, inheritable=False)
        finally:
            os.close(memfd)
    finally:
        os.close(write_fd)


def start(
    plan: SandboxPlan, cgroup_procs: list[str], fd_map: Mapping[int, int], result_w: int,
    lifeline_r: int, argv: list[str], env: Mapping[str, str],
) -> int:
    """``posix_spawn`` the executor for ``argv``; returns its pid (the keeper).

    ``fd_map`` maps each of the command's fds to the caller's fd it must be. Raises
    ``NativeUnavailable`` when the binary is missing or cannot run (nothing started).
    """
    global prebuilt_used, _last_key
    path = binary()
    pooled = native_pool.pool_enabled()  # read once: the switch may flip meanwhile
    key = view_id = None
    if pooled and _prebuildable(plan):
        view_id = _view_identity(plan)
        key = plan_key(plan, view_id) if view_id is not None else None
    pool = native_pool.pool()
    idle = pool.take(path, key) if pooled else None
    # Without the pool nothing is pre-built, and this command says nothing about the next.
    if pooled:
        if key is not None and key == _last_key:  # a second command in this sandbox: the
            current = pool.prebuild  # executors started next build it ahead
            if current is None or current.key != key:
                pool.remember(_Prebuild(key, plan))
        elif pool.prebuild is not None:  # one command per sandbox (a batch of siblings):
            pool.remember(None)  # building ahead would only be thrown away
        _last_key = key
    if idle is not None and key is not None and idle.key == key:
        assert view_id is not None
        sent = _launch(path, plan, cgroup_procs, fd_map, result_w, lifeline_r, argv, env,
                       idle, f"K{key} {view_id[0]}:{view_id[1]}\n")
        if sent is not None:
            prebuilt_used += 1
            return sent
        idle = None  # it let its sandbox go (its mounts changed) or died: start afresh
    pid = _launch(path, plan, cgroup_procs, fd_map, result_w, lifeline_r, argv, env, idle, None)
    assert pid is not None
    return pid


def _launch(
    path: Path, plan: SandboxPlan, cgroup_procs: list[str], fd_map: Mapping[int, int],
    result_w: int, lifeline_r: int, argv: list[str], env: Mapping[str, str],
    idle: native_pool.Idle | None, prebuilt: str | None,
) -> int | None:
    """Hand the request to ``idle`` or ``posix_spawn`` an executor; the keeper's pid.

    ``prebuilt``: the key line for an idle executor that built this very sandbox (the
    request then carries no steps and no namespace fds); None when its send fails (the
    caller then starts afresh with the whole request: never a partial one).
    """
    targets = sorted(fd_map)
    netns = _pool.take() if _pooled(plan) and prebuilt is None else None
    plan_fds = [] if prebuilt is not None else plan.child_fds
    joined = plan.netns_fd if prebuilt is None else None  # a branch's namespace (in plan_fds)
    controls = [result_w, lifeline_r, *plan_fds, *([netns] if netns is not None else [])]
    memfd, fill = os.pipe2(os.O_CLOEXEC)  # the request's fd (see ``fill_request``)
    try:
        # Every source first goes above every fd involved, then targets take their
        # numbers: a target may be another source's current number.
        sources = [memfd, *controls, *(fd_map[t] for t in targets)]
        base = max([2, *sources, *targets]) + 1
        high = {fd: base + i for i, fd in enumerate(sources)}
        full = prebuilt is None
        request = encode_request(
            plan, lifeline=high[lifeline_r],
            userns=high[plan.userns_fd] if plan.userns_fd is not None and full else -1,
            mntns=high[plan.mntns_fd] if plan.mntns_fd is not None and full else -1,
            netns=high[joined] if joined is not None else high[netns] if netns is not None else -1,
            cgroup_procs=cgroup_procs, keep=targets, argv=argv, env=env, steps=full,
        )
        fill_request(memfd, fill, request, "forkdeck-sandbox-request")
        fill = -1
        if idle is not None and len(sources) <= native_pool.MAX_PASSED:
            # A pre-started one: the same fds at the same numbers, by SCM_RIGHTS; with
            # the key (and the view as we see it now) when it built this very sandbox.
            numbers = [high[fd] for fd in (memfd, *controls)] + targets
            sent, idle = idle.send(sources, numbers, prebuilt or ""), None
            if sent is not None or not full:
                return sent
        if not full:
            return None
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
        if fill >= 0:
            os.close(fill)
        if netns is not None:  # the executor has its copy (or never ran): used once
            os.close(netns)


prebuilt_used = 0  # commands that ran in a sandbox pre-built for them (tests)
_last_key: str | None = None  # the plan key of this process's last command


def _prebuildable(plan: SandboxPlan) -> bool:
    """Whether a pre-started executor may build this sandbox ahead: a root caller in its
    own user namespace (the executor then joins the command's cgroups, and moves its
    init there, from inside the sandbox's namespaces through the host's root)."""
    return (not plan.new_userns and plan.userns_fd is None and os.geteuid() == 0
            and plan.netns_fd is None)  # a joined namespace is not pre-built into


def _view_identity(plan: SandboxPlan) -> tuple[int, int] | None:
    """The view directory's device and inode as the sandbox will see it (a view
    replaced since has another: a pre-built sandbox pins the old one's)."""
    where = plan.view if plan.helper_pid is None else f"/proc/{plan.helper_pid}/root{plan.view}"
    try:
        st = os.stat(where)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _ns_identity(fd: int | None) -> tuple[int, int] | None:
    if fd is None:
        return None
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _hidden_identities(plan: SandboxPlan) -> tuple[tuple[int, int] | None, ...]:
    """Each hidden secret's device and inode now: a secret replaced by a rename (how
    tools refresh a token) is a new inode, and the mask of a pre-built sandbox covered
    the old one (the kernel detaches it; that is not always reported to the executor
    watching the mount table). Its key then differs and the sandbox is built afresh."""
    out: list[tuple[int, int] | None] = []
    for path in (*plan.hide_files, *plan.hide_dirs):
        try:
            st = os.lstat(path)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_dev, st.st_ino))
    return tuple(out)


def plan_key(plan: SandboxPlan, view: tuple[int, int]) -> str:
    """What a pre-built sandbox must share with a request to serve it: the compiled
    steps (every mount, decided from the host as the plan saw it just now), the
    namespaces made and joined, the ids, the hostname and the view's identity."""
    digest = _encode_steps(plan.steps)[1]
    parts = (digest, namespace_flags(plan), plan.new_userns, plan.uid, plan.gid,
             plan.network, HOSTNAME, _ns_identity(plan.userns_fd),
             _ns_identity(plan.mntns_fd), view, _hidden_identities(plan),
             plan.network_mode, _ns_identity(plan.netns_fd))  # none/private/host never mix
    key = _keys.get(parts)
    if key is None:  # (the same parts, the same key: hashed once)
        key = hashlib.sha256(repr(parts).encode()).hexdigest()[:40]
        if len(_keys) >= 64:
            _keys.clear()
        _keys[parts] = key
    return key


_keys: dict[tuple[object, ...], str] = {}


@dataclasses.dataclass
class _Prebuild:
    """The last command's sandbox, for the executors started after it to build ahead.

    Holds no fd: the view helper's mount namespace is opened again when an executor is
    primed, and only used if it is still the one the key was made with.
    """

    key: str
    plan: SandboxPlan
    # The pre-build request, the same for every executor primed with this sandbox:
    # encoded once (priming runs in the pool's thread while the caller's next command
    # may be starting, and holds the interpreter's lock while it encodes).
    request: bytes | None = dataclasses.field(default=None, init=False)

    def __post_init__(self) -> None:
        self.mntns = _ns_identity(self.plan.mntns_fd)
        self.plan = dataclasses.replace(self.plan, userns_fd=None, mntns_fd=None)

    def prime(self, idle: native_pool.Idle) -> bool:
        """Send ``idle`` the pre-build message; whether it was sent."""
        plan = self.plan
        mntns = None
        try:
            if self.mntns is not None:
                mntns = os.open(f"/proc/{plan.helper_pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
                if _ns_identity(mntns) != self.mntns:
                    return False
            memfd, fill = os.pipe2(os.O_CLOEXEC)
        except OSError:
            if mntns is not None:
                os.close(mntns)
            return False
        try:
            request = self.request
            if request is None:  # (mntns is there exactly when self.mntns is)
                request = self.request = encode_request(
                    plan, lifeline=-1, userns=-1, mntns=5 if mntns is not None else -1,
                    cgroup_procs=[], keep=[], argv=["-"], env={},
                )
            try:
                fill_request(memfd, fill, request, "forkdeck-sandbox-prebuild")
            except OSError:  # too large for a pipe and for this caller's limit: not ahead
                return False
            fds = [memfd, *([mntns] if mntns is not None else [])]
            return idle.post(f"P{self.key}\n", fds, [4, 5][:len(fds)])
        finally:
            os.close(memfd)
            if mntns is not None:
                os.close(mntns)


def take_netns(plan: SandboxPlan) -> int | None:
    """A fresh network namespace made ahead (``lo`` up) for ``plan``'s sandbox to join,
    or None (not poolable, or none ready: the sandbox makes its own). The caller closes
    it once the sandbox's init has its copy."""
    return _pool.take() if _pooled(plan) else None


def _pooled(plan: SandboxPlan) -> bool:
    """Whether this sandbox can join a pre-made network namespace: a private network
    made by a root caller in its own user namespace (else the new user namespace must
    own the network namespace, so the executor makes it)."""
    return (not plan.network and not plan.new_userns and plan.userns_fd is None
            and os.geteuid() == 0 and plan.netns_fd is None)


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

    def drain(self) -> None:
        """Close the namespaces made ahead (the next command makes them again): code
        counting this process's fds calls it, through ``drain_pool``."""
        with self.lock:
            fds, self.ready = self.ready, []
            self.wanted = False
        for fd in fds:
            os.close(fd)

    def _fill(self) -> None:
        while not self.broken:
            self.wake.wait()
            self.wake.clear()
            try:  # open only while filling: an idle pool holds only its namespaces
                home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self.broken = True
                return
            try:
                self._fill_from(home)
            finally:
                os.close(home)

    def _fill_from(self, home: int) -> None:
        while True:
            with self.lock:
                if len(self.ready) >= self.SIZE or self.broken or not self.wanted:
                    return
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
                if self.wanted:  # not drained meanwhile
                    self.ready.append(fd)
                    fd = -1
            if fd >= 0:
                os.close(fd)


_pool = _NetnsPool()


def drain_pool() -> None:
    """End and reap this process's idle executors, close its pre-made network
    namespaces and the secret masks' watch (before counting its children or its fds)."""
    native_pool.drain_executors()
    _pool.drain()
    masks.forget_cached_masks()


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
           "encode_request", "fell_back", "start", "take_netns"]
