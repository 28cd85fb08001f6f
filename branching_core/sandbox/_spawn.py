"""Process machinery shared by the callable and the command form.

Why one module of ~630 lines: the keeper, the init and the caller's side
(``SpawnedProcess``) are three ends of one protocol (the lifeline pipe, the record
format, the fork order and the fds each end closes); split apart, a change to one end
could no longer be checked against the others on one screen of code. The native
executor (``native.py``, ``native/forkdeck_sandbox.c``) is the same keeper and init for
commands, in C: it speaks this protocol, and ``spawn`` starts it instead of forking
when it is given a command.

Shape of a running branch::

    caller ──fork──> keeper (outer pid ns) ──fork──> init (pid 1 of a new pid ns)
                                                      └─ target / spawned command

* The keeper joins the branch cgroups, enters/unshares the namespaces, forks the
  init, then only waits. It watches a *lifeline* pipe whose write end only the
  caller holds: when the caller closes it (abort, timeout) or dies (even by
  SIGKILL), the keeper SIGKILLs the init, and the kernel kills everything in the
  pid namespace, ``setsid``/double-forked/``nohup`` children included. A pipe is
  used instead of PR_SET_PDEATHSIG on the keeper because PDEATHSIG fires when the
  *thread* that forked exits, and callers fork from short-lived worker threads.
* The init has PR_SET_PDEATHSIG=SIGKILL towards the single-threaded keeper.
* The caller drains stdout, stderr, the result pipe and any extra fds in one
  background thread per branch (no deadlock at any output volume), reaps the keeper
  through a pidfd and removes the branch cgroups. Captured streams keep only their
  head and tail (``capture.BoundedCapture``): output volume never grows the caller.

Between fork and the target only ``os``, ``select``, ``signal`` and the ctypes
syscalls run: the caller may be multi-threaded, so no lock may be touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import selectors
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from select import POLLHUP, POLLIN
from select import poll as select_poll
from typing import TYPE_CHECKING, NoReturn

from branching_core.errors import (
    InvalidArgumentError,
    InvalidStateError,
    NamespaceError,
    ProcessForkError,
    ResourceLimitError,
)
from branching_core.sandbox import _syscalls as sc
from branching_core.sandbox import native
from branching_core.sandbox.capture import DEFAULT_MAX_OUTPUT, BoundedCapture, LineSplitter
from branching_core.sandbox.namespaces import (
    SandboxPlan,
    build_filesystem,
    enter_namespaces,
    finish_isolation,
)
from branching_core.sandbox.native import NativeUnavailable

if TYPE_CHECKING:  # (cgroups only for annotations)
    from branching_core.sandbox.cgroups import BranchCgroups

# Parent-side fds of live branches: no child of ours (or of anyone's os.fork) needs
# them, and a stray copy would hold a pipe open or keep a lifeline alive.
_PARENT_FDS: set[int] = set()


def _close_parent_fds_in_child() -> None:
    for fd in tuple(_PARENT_FDS):
        with contextlib.suppress(OSError):
            os.close(fd)
    _PARENT_FDS.clear()


os.register_at_fork(after_in_child=_close_parent_fds_in_child)

TAG_SETUP = b"S"  # setup failed: kind \0 message
TAG_RESULT = b"R"  # callable finished: meta pickle + payload pickle
TAG_EXIT = b"X"  # command finished: raw wait status of the command

ChildMain = Callable[[SandboxPlan, int], int]
"""Runs in the init after isolation; gets the plan and the result fd, returns the exit code."""


def write_record(fd: int, tag: bytes, *parts: bytes) -> None:
    """Write ``tag`` then each part length-prefixed; loops over partial writes."""
    for chunk in (tag, *(struct.pack("<Q", len(p)) + p for p in parts)):
        view = memoryview(chunk)
        while view:
            try:
                n = os.write(fd, view)
            except InterruptedError:
                continue
            view = view[n:]


def write_large_record(fd: int, tag: bytes, *parts: bytes) -> None:
    """Like ``write_record`` without building a joined copy of big payloads."""
    write_record(fd, tag)
    for part in parts:
        for chunk in (struct.pack("<Q", len(part)), part):
            view = memoryview(chunk)
            while view:
                try:
                    n = os.write(fd, view)
                except InterruptedError:
                    continue
                view = view[n:]


def parse_record(data: bytes) -> tuple[bytes, list[bytes]]:
    """Split a record into its tag and parts (raises ValueError when truncated)."""
    if not data:
        raise InvalidArgumentError("empty")
    tag, pos, parts = data[:1], 1, []
    while pos < len(data):
        if pos + 8 > len(data):
            raise InvalidArgumentError("truncated length")
        (size,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        if pos + size > len(data):
            raise InvalidArgumentError("truncated part")
        parts.append(data[pos:pos + size])
        pos += size
    return tag, parts


def _setup_failure(fd: int, kind: str, message: str) -> NoReturn:
    with contextlib.suppress(OSError):
        write_record(fd, TAG_SETUP, kind.encode(), message.encode("utf-8", "replace"))
    os._exit(125)


def _move_high(fd: int, floor: int) -> int:
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)


def _keeper(
    plan: SandboxPlan,
    cgroup_procs: list[str],
    fd_map: dict[int, int],
    result_w: int,
    lifeline_r: int,
    close_fds: bool,
    child_main: ChildMain,
) -> NoReturn:
    """Body of the keeper process; never returns."""
    try:
        os.setsid()  # out of the caller's terminal job: a ^C is the caller's to decide
        floor = max([10, *fd_map]) + 1
        old_result_w, old_lifeline_r = result_w, lifeline_r
        result_w = _move_high(result_w, floor)
        lifeline_r = _move_high(lifeline_r, floor)
        if plan.userns_fd is not None:
            plan.userns_fd = _move_high(plan.userns_fd, floor)
        if plan.mntns_fd is not None:
            plan.mntns_fd = _move_high(plan.mntns_fd, floor)
        if plan.netns_fd is not None:
            plan.netns_fd = _move_high(plan.netns_fd, floor)
        moved = {target: _move_high(src, floor) for target, src in fd_map.items()}
        originals = set(fd_map.values()) | {old_result_w, old_lifeline_r}
        for target, src in moved.items():
            os.dup2(src, target, inheritable=True)
        keep = {result_w, lifeline_r, *plan.child_fds, *moved}
        for fd in set(moved.values()) | (originals - keep):
            with contextlib.suppress(OSError):
                os.close(fd)
        if close_fds:
            _close_all_but(keep)
    except BaseException as exc:
        _setup_failure(result_w, "namespace", f"preparing the child's fds failed: {exc}")
    try:
        for procs in cgroup_procs:
            fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
    except OSError as exc:
        _setup_failure(result_w, "limits", f"joining cgroup {exc.filename}: {exc.strerror}")
    try:
        enter_namespaces(plan)
    except OSError as exc:
        _setup_failure(result_w, "namespace", f"creating namespaces failed: {exc.strerror or exc}")
    plan.close_fds()
    # No core dump when the keeper re-raises its init's fatal signal. Only now: a
    # non-dumpable process cannot open its own /proc/self/uid_map.
    sc.prctl(sc.PR_SET_DUMPABLE, 0)
    try:
        init_pid = os.fork()
    except OSError as exc:
        _setup_failure(result_w, "namespace", f"forking the sandbox init failed: {exc}")
    if init_pid == 0:
        _init(plan, result_w, lifeline_r, child_main)
    os.close(result_w)
    for fd in (0, 1, 2, *fd_map):
        with contextlib.suppress(OSError):
            os.close(fd)
    pidfd = os.pidfd_open(init_pid)
    poller = select_poll()
    poller.register(pidfd, POLLIN)
    poller.register(lifeline_r, POLLIN | POLLHUP)
    killed = False
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        if any(fd == pidfd for fd, _ in events):
            break
        if not killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(init_pid, signal.SIGKILL)
            killed = True
            poller.unregister(lifeline_r)
    _, status = os.waitpid(init_pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL cannot be reset (or caught)
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 126)


def _close_all_but(keep: set[int]) -> None:
    fds = sorted({0, 1, 2} | keep)
    prev = 0
    for fd in fds:
        if fd > prev:  # os.closerange(n, n) would close everything (close_range(n, ~0))
            os.closerange(prev, fd)
        prev = fd + 1
    os.closerange(prev, 1 << 20)


def _init(plan: SandboxPlan, result_w: int, lifeline_r: int, child_main: ChildMain) -> NoReturn:
    """Body of the pid-namespace init; never returns."""
    try:
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        sc.prctl(sc.PR_SET_DUMPABLE, 1)  # the keeper's setting: /proc/self must stay ours
        os.close(lifeline_r)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        build_filesystem(plan)
        finish_isolation(plan)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        _setup_failure(result_w, "namespace", f"sandbox setup failed: {exc.strerror or exc}{where}")
    except BaseException as exc:
        _setup_failure(result_w, "namespace", f"sandbox setup failed: {exc!r}")
    try:
        code = child_main(plan, result_w)
    except BaseException:
        code = 1
    os._exit(code)


@dataclass
class ExitInfo:
    """How the keeper ended, plus what the branch sent back."""

    exit_code: int | None = None
    signal: int | None = None
    record: bytes = b""
    oom_killed: bool = False


@dataclass
class SpawnedProcess:
    """Parent-side handle: pipes drained by one thread, keeper reaped through a pidfd."""

    pid: int
    pidfd: int
    lifeline_w: int | None
    cgroups: BranchCgroups
    on_output: Callable[[str, str], None] | None
    capture_fds: dict[int, int]  # child fd -> parent read end
    stdout_r: int = -1
    stderr_r: int = -1
    result_r: int = -1
    max_output: int = DEFAULT_MAX_OUTPUT
    stdout: BoundedCapture = field(init=False)
    stderr: BoundedCapture = field(init=False)
    extra: dict[int, BoundedCapture] = field(default_factory=dict)
    info: ExitInfo = field(default_factory=ExitInfo)
    done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _inline: bool = False  # drain_here is draining in some caller's thread
    _lock: threading.Lock = field(default_factory=threading.Lock)
    output_errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stdout = BoundedCapture(self.max_output)
        self.stderr = BoundedCapture(self.max_output)

    def start_drain(self, resume: bool = False) -> None:
        """Drain in a thread of its own (``resume``: go on from ``drain_here``)."""
        if not resume:
            self._prepare_drain()
        self._thread = threading.Thread(
            target=self._drain, name=f"forkdeck-sandbox-{self.pid}", daemon=True
        )
        self._thread.start()

    def kill_tree(self) -> None:
        """Close the lifeline: the keeper SIGKILLs the pid-namespace init."""
        with self._lock:
            fd, self.lifeline_w = self.lifeline_w, None
        if fd is not None:
            _PARENT_FDS.discard(fd)
            os.close(fd)

    def hard_kill(self) -> None:
        """Kill the keeper itself (its init follows through PDEATHSIG) and the cgroups."""
        if not self.done.is_set():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        self.cgroups.kill()

    def terminate(self, timeout: float) -> bool:
        """Kill the whole tree and wait for cleanup; escalate if the keeper lingers.

        Returns False when the branch had already ended (nothing was killed).
        """
        if self.done.is_set():
            return False
        self.kill_tree()
        if self._thread is None and not self._inline:  # nothing drains: a thread does now
            self.start_drain(resume=True)
        if not self.done.wait(timeout):
            self.hard_kill()
            self.done.wait(timeout)
        return True


    def _call_on_output(self, name: str, line: str) -> None:
        assert self.on_output is not None
        try:
            self.on_output(name, line)
        except Exception as exc:  # a broken callback must not stop the draining
            self.output_errors.append(exc)

    def _splitter(self, name: str) -> LineSplitter | None:
        if self.on_output is None:
            return None
        return LineSplitter(lambda line: self._call_on_output(name, line))

    def _prepare_drain(self) -> None:
        """The drain's state (on self, so a drain interrupted in the calling thread can
        go on in a thread)."""
        self._sel = sel = selectors.DefaultSelector()
        self._record = bytearray()  # the callable's result: the value asked for, kept whole
        # fd -> (where its bytes go, its on_output line splitter)
        self._streams: dict[int, tuple[BoundedCapture | bytearray, LineSplitter | None]] = {
            self.stdout_r: (self.stdout, self._splitter("stdout")),
            self.stderr_r: (self.stderr, self._splitter("stderr")),
            self.result_r: (self._record, None),
        }
        for child_fd, rfd in self.capture_fds.items():
            cap = self.extra.setdefault(child_fd, BoundedCapture(self.max_output))
            self._streams[rfd] = (cap, None)
        for fd in self._streams:
            sel.register(fd, selectors.EVENT_READ)
        sel.register(self.pidfd, selectors.EVENT_READ)  # readable once the keeper ended
        self._exited = self._early = False
        self._status = 0

    def _finish_stream(self, fd: int) -> None:
        self._sel.unregister(fd)
        splitter = self._streams[fd][1]
        if splitter is not None:
            splitter.close()

    def _read_some(self, fd: int) -> bool:
        sink, splitter = self._streams[fd]
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._finish_stream(fd)
            return False
        if isinstance(sink, BoundedCapture):
            sink.add(data)
        else:
            sink += data
        if splitter is not None:
            splitter.feed(data)
        return True

    def _drain_rest(self) -> None:
        # Every process of the branch is dead; a leaked copy of a write end in
        # some unrelated fork must not keep us waiting for EOF.
        sel = self._sel
        for fd in list(self._streams):
            if fd in sel.get_map():
                os.set_blocking(fd, False)
                while fd in sel.get_map() and self._read_some(fd):
                    pass
                if fd in sel.get_map():
                    self._finish_stream(fd)

    def _command_over(self) -> bool:
        # A command's init reports its end only once every other process of its pid
        # namespace is dead and reaped, and its pipes close as it exits: with every
        # stream at EOF and a whole exit record, nothing of the command runs. Its
        # own exit (the teardown of the sandbox's mounts) is then not waited for,
        # unless branch cgroups must be removed (busy until it is gone).
        return (set(self._sel.get_map()) == {self.pidfd} and not self.cgroups.paths
                and _is_exit_record(self._record))

    def _drain(self) -> None:
        """The drain thread's body."""
        try:
            self._drain_until(None)
        finally:
            self.done.set()  # even if it broke (an interrupted drain_here): no waiter hangs

    def wait(self, timeout: float | None) -> bool:
        """Wait until the branch has ended (whether it did within ``timeout``): drains
        here when nothing drains yet (``spawn(drain=False)``), which kills the tree at
        ``timeout``; else waits for the drain thread (the caller kills on False)."""
        if self._thread is None and not self.done.is_set():
            return self.drain_here(timeout)
        return self.done.wait(timeout)

    def drain_here(self, timeout: float | None) -> bool:
        """Drain in the calling thread until the branch has ended: a synchronous caller
        then needs no drain thread and no wake-up from one (``spawn(drain=False)``).

        At ``timeout`` the tree is killed (``terminate``'s escalation: the lifeline,
        then after 5 s the keeper and the cgroups) and False is returned once it has
        ended. Interrupted (^C), the tree is killed and a thread finishes the draining.
        """
        self._inline = True
        try:
            return self._drain_until(None if timeout is None else time.monotonic() + timeout)
        except BaseException:
            self.kill_tree()
            if not self.done.is_set():
                self.start_drain(resume=True)
            raise
        finally:
            self._inline = False

    def _drain_until(self, deadline: float | None) -> bool:
        """Drain to the end; at ``deadline`` kill the tree. Whether it ended in time."""
        sel = self._sel
        in_time = True
        while not self._exited:
            wait = None
            if deadline is not None:
                wait = max(0.0, deadline - time.monotonic())
            events = sel.select(wait)
            if not events and deadline is not None and time.monotonic() >= deadline:
                if in_time:  # first the lifeline, then (5 s on) the keeper itself
                    in_time = False
                    self.kill_tree()
                    deadline = time.monotonic() + 5.0
                else:
                    self.hard_kill()
                    deadline = None
                continue
            for key, _ in events:
                fd = key.fd
                if fd not in sel.get_map():  # finished by an earlier event of this batch
                    continue
                if fd == self.pidfd:
                    sel.unregister(fd)
                    self._exited = True
                    self._status = os.waitpid(self.pid, 0)[1]
                elif not self._read_some(fd) and self._command_over():
                    sel.unregister(self.pidfd)
                    self._status = 0  # what the keeper exits with after an exit record
                    self._exited = self._early = True
        self._drain_rest()
        self._end()
        return in_time

    def _end(self) -> None:
        self._sel.close()
        for fd in self._streams:
            _PARENT_FDS.discard(fd)
            os.close(fd)
        info, status = self.info, self._status
        if os.WIFSIGNALED(status):
            info.signal = os.WTERMSIG(status)
        else:
            info.exit_code = os.waitstatus_to_exitcode(status)
        info.record = bytes(self._record)
        info.oom_killed = self.cgroups.oom_killed()
        self.kill_tree()
        self.cgroups.remove()
        _PARENT_FDS.discard(self.pidfd)
        os.close(self.pidfd)
        self.pidfd = -1
        if self._early:  # the keeper follows its init within a moment: reaped aside
            _reaper.add(self.pid)
        self.done.set()
        native.refill()


class _Reaper:
    """Reaps keepers that reported their command's end before exiting, in one thread of
    its own: the caller (a synchronous ``run_command`` drains in its own thread) need not
    wait for the teardown of the sandbox's mounts at the init's exit."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def add(self, pid: int) -> None:
        self.queue.put(pid)
        if self.thread is None:
            with self.lock:
                if self.thread is None:
                    self.thread = threading.Thread(target=self._run, daemon=True,
                                                   name="forkdeck-keeper-reaper")
                    self.thread.start()

    def _run(self) -> None:
        while True:
            pid = self.queue.get()
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


_reaper = _Reaper()


def _new_reaper_in_child() -> None:
    global _reaper
    _reaper = _Reaper()  # the parent's keepers are not a fork child's to reap


os.register_at_fork(after_in_child=_new_reaper_in_child)


class SpawnedProcessView:
    """What every sandboxed branch exposes about its process, whatever it runs.

    Subclasses set ``_branch`` to the ``SpawnedProcess`` they drive when they start it.
    """

    _branch: SpawnedProcess | None = None

    @property
    def _b(self) -> SpawnedProcess:
        if self._branch is None:
            raise InvalidStateError(f"{type(self).__name__} has not been started")
        return self._branch

    @property
    def pid(self) -> int:
        """The keeper's pid (killing it kills the whole sandbox)."""
        return self._b.pid

    @property
    def alive(self) -> bool:
        return not self._b.done.is_set()

    @property
    def stdout(self) -> str:
        """Captured stdout: head and tail, a marker line between them if bytes were dropped."""
        return self._b.stdout.text()

    @property
    def stderr(self) -> str:
        return self._b.stderr.text()

    @property
    def stdout_dropped(self) -> int:
        """Bytes of stdout not kept (the middle of an output longer than ``max_output``)."""
        return self._b.stdout.dropped

    @property
    def stderr_dropped(self) -> int:
        return self._b.stderr.dropped

    @property
    def oom_killed(self) -> bool:
        return self._b.done.is_set() and self._b.info.oom_killed


def _is_exit_record(data: bytes | bytearray) -> bool:
    try:
        tag, parts = parse_record(bytes(data))
    except ValueError:
        return False
    return tag == TAG_EXIT and len(parts) == 1


def spawn(
    plan: SandboxPlan,
    cgroups: BranchCgroups,
    child_main: ChildMain,
    *,
    close_fds: bool,
    on_output: Callable[[str, str], None] | None = None,
    capture_fds: list[int] | None = None,
    pass_fds: Mapping[int, int] | None = None,
    max_output: int = DEFAULT_MAX_OUTPUT,
    command: tuple[list[str], dict[str, str]] | None = None,
    drain: bool = True,
) -> SpawnedProcess:
    """Start the keeper and start draining; the caller owns ``cgroups`` until this returns.

    With ``command=(argv, env)`` (``child_main`` being that command's main, and
    ``close_fds`` true) the native executor is the keeper, unless ``FORKDECK_NATIVE=0``
    or it cannot start (then a warning is logged once); otherwise this process forks it.
    ``drain=False``: no drain thread; the caller drains with ``wait`` in its own thread
    (a synchronous caller saves a thread start and a cross-thread wake-up).
    """
    child_ends: list[int] = []
    parent_ends: list[int] = []

    def pipe() -> tuple[int, int]:
        r, w = os.pipe2(os.O_CLOEXEC)
        parent_ends.append(r)
        child_ends.append(w)
        return r, w

    try:
        out_r, out_w = pipe()
        err_r, err_w = pipe()
        res_r, res_w = pipe()
        capture: dict[int, int] = {}
        fd_map: dict[int, int] = {1: out_w, 2: err_w}
        for child_fd in capture_fds or []:
            r, w = pipe()
            capture[child_fd] = r
            fd_map[child_fd] = w
        for child_fd, src in (pass_fds or {}).items():
            fd_map[child_fd] = src
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        child_ends.append(devnull)
        fd_map[0] = devnull
        life_r, life_w = os.pipe2(os.O_CLOEXEC)
        child_ends.append(life_r)
        parent_ends.append(life_w)
    except OSError:
        for fd in child_ends + parent_ends:
            os.close(fd)
        raise
    _PARENT_FDS.update(parent_ends)
    pid = None
    if command is not None and native.enabled():
        try:
            pid = native.start(plan, cgroups.procs_files, fd_map, res_w, life_r, *command)
        except NativeUnavailable as exc:
            native.fell_back(str(exc))
        except BaseException as exc:
            _close_ends(child_ends + parent_ends)
            if isinstance(exc, OSError):
                raise ProcessForkError(f"starting the sandbox failed: {exc.strerror}") from exc
            raise
    if pid is None:
        pid = _fork_keeper(plan, cgroups, child_main, close_fds, fd_map, res_w, life_r,
                           child_ends, parent_ends)
    pidfd = _started(pid, plan, child_ends)
    branch = SpawnedProcess(
        pid=pid, pidfd=pidfd, lifeline_w=life_w, cgroups=cgroups, on_output=on_output,
        capture_fds=capture, stdout_r=out_r, stderr_r=err_r, result_r=res_r,
        max_output=max_output,
    )
    if drain:
        branch.start_drain()
    else:
        branch._prepare_drain()
    return branch


def _fork_keeper(
    plan: SandboxPlan, cgroups: BranchCgroups, child_main: ChildMain, close_fds: bool,
    fd_map: dict[int, int], res_w: int, life_r: int,
    child_ends: list[int], parent_ends: list[int],
) -> int:
    """The Python path: fork the keeper from this process; returns its pid."""
    try:
        pid = os.fork()
    except OSError as exc:
        _close_ends(child_ends + parent_ends)
        raise ProcessForkError(f"fork() failed: {exc.strerror}") from exc
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            _keeper(plan, cgroups.procs_files, fd_map, res_w, life_r, close_fds, child_main)
        finally:
            os._exit(127)
    return pid


def _close_ends(fds: list[int]) -> None:
    for fd in fds:
        _PARENT_FDS.discard(fd)
        os.close(fd)


def _started(pid: int, plan: SandboxPlan, child_ends: list[int]) -> int:
    """After the keeper started: drop the child's ends here; returns its pidfd."""
    for fd in child_ends:
        os.close(fd)
    plan.close_fds()
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # pragma: no cover - kernels without pidfd are not supported
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    _PARENT_FDS.add(pidfd)
    return pidfd


def setup_error(info: ExitInfo) -> Exception | None:
    """The NamespaceError/ResourceLimitError a setup record describes, if any."""
    try:
        tag, parts = parse_record(info.record)
    except ValueError:
        return None
    if tag != TAG_SETUP or len(parts) != 2:
        return None
    kind, message = parts[0].decode(), parts[1].decode("utf-8", "replace")
    if kind == "limits":
        return ResourceLimitError(message, exit_code=info.exit_code)
    return NamespaceError(message, exit_code=info.exit_code)


def flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()


def fresh_std_streams() -> None:
    """New stdout/stderr objects on fds 1 and 2 in the child.

    The inherited objects may have been locked by another thread at fork time (a
    deadlock waiting to happen) and may hold the caller's unflushed bytes.
    """
    sys.stdout = sys.__stdout__ = open(  # noqa: SIM115 - lives until os._exit
        1, "w", encoding="utf-8", errors="backslashreplace", closefd=False
    )
    sys.stderr = sys.__stderr__ = open(  # noqa: SIM115
        2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1
    )


__all__ = [
    "TAG_EXIT",
    "TAG_RESULT",
    "TAG_SETUP",
    "ExitInfo",
    "SpawnedProcess",
    "flush_std_streams",
    "fresh_std_streams",
    "parse_record",
    "setup_error",
    "spawn",
    "write_large_record",
    "write_record",
]
