# pyright: strict
"""The caller's end of the sandbox protocol (``_spawn``'s docstring): ``SpawnedProcess``
drains the branch's pipes (in a thread, or in the thread that waits), reaps the keeper
(or the init forked straight into its namespace) through a pidfd, kills through the
lifeline or that pidfd, and reads the result record; ``SpawnedProcessView`` is what every
sandboxed branch exposes about its process. ``PARENT_FDS`` are closed in every fork
child (an at-fork handler)."""

from __future__ import annotations

import contextlib
import os
import queue
import selectors
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from branching_core.errors import (
    InvalidStateError,
)
from branching_core.sandbox import native
from branching_core.sandbox._records import is_exit_record, might_end, split_end
from branching_core.sandbox.capture import DEFAULT_MAX_OUTPUT, BoundedCapture, LineSplitter

if TYPE_CHECKING:  # (cgroups only for annotations)
    from branching_core.sandbox.cgroups import BranchCgroups


_EXIT_RECORD_SIZE = 1 + 8 + 4  # TAG_EXIT, one part: the raw wait status ("<i")

# Parent-side fds of live branches: no child of ours (or of anyone's os.fork) needs
# them, and a stray copy would hold a pipe open or keep a lifeline alive.
PARENT_FDS: set[int] = set()


def _close_parent_fds_in_child() -> None:
    for fd in tuple(PARENT_FDS):
        with contextlib.suppress(OSError):
            os.close(fd)
    PARENT_FDS.clear()


os.register_at_fork(after_in_child=_close_parent_fds_in_child)


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
    extra: dict[int, BoundedCapture] = field(default_factory=dict[int, BoundedCapture])
    info: ExitInfo = field(default_factory=ExitInfo)
    done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _inline: bool = False  # ``wait`` drains in some caller's thread (``_drain_here``)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    output_errors: list[BaseException] = field(default_factory=list[BaseException])
    direct: bool = False  # ``pid`` is the init itself (one fork: ``_forker``), no keeper
    passed_fds: bool = False  # fds passed to the command uncaptured (``spawn(pass_fds=)``)

    def __post_init__(self) -> None:
        self.stdout = BoundedCapture(self.max_output)
        self.stderr = BoundedCapture(self.max_output)

    def start_drain(self) -> None:
        """Drain in a thread of its own, from the start."""
        self.prepare_drain()
        self._hand_to_thread()

    def kill_tree(self) -> None:
        """Close the lifeline: the keeper SIGKILLs the pid-namespace init (with no
        keeper, the init is SIGKILLed here). Either way its whole pid namespace dies."""
        with self._lock:
            fd, self.lifeline_w = self.lifeline_w, None
            if self.direct:
                self._signal(signal.SIGKILL)
        if fd is not None:
            PARENT_FDS.discard(fd)
            os.close(fd)

    def hard_kill(self) -> None:
        """Kill the keeper itself (its init follows through PDEATHSIG) and the cgroups."""
        with self._lock:
            self._signal(signal.SIGKILL)
        self.cgroups.kill()

    def _signal(self, sig: int) -> None:
        """Signal the keeper (or the init) through its pidfd, while it is open (under
        ``_lock``: ``_end`` closes it under the same lock, so a number reused by some
        other file, or another sandbox's pidfd, is never signalled)."""
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):  # ESRCH once it has been reaped
                signal.pidfd_send_signal(self.pidfd, sig)

    def terminate(self, timeout: float) -> bool:
        """Kill the whole tree and wait for cleanup; escalate if the keeper lingers.

        Returns False when the branch had already ended (nothing was killed).
        """
        if self.done.is_set():
            return False
        self.kill_tree()
        self._hand_to_thread()  # nothing drains yet: a thread does now
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

    def prepare_drain(self) -> None:
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
        self._status = self._end_code = 0

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
        # A command's init writes its exit record only once every other process of its
        # pid namespace is dead and reaped, and then only exits: with the command's
        # streams at EOF and the record whole, nothing of the command runs. The init's
        # own exit (closing the result pipe, the teardown of the sandbox's mounts) is
        # then not waited for, unless branch cgroups must be removed (busy until it is
        # gone). (A whole exit record is 13 bytes: a long record is never parsed here.)
        return (len(self._record) == _EXIT_RECORD_SIZE and not self.cgroups.paths
                and set(self._sel.get_map()) <= self._may_stay_open()
                and is_exit_record(self._record))

    def _may_stay_open(self) -> set[int]:
        # A keeper holds copies of the fds passed to the command (no stream of ours
        # shows their EOF) until it closes them, just before its copy of the result
        # pipe: with such fds the result pipe's EOF is waited for, so that none of them
        # is still open anywhere in the branch when the caller gets its answer.
        if self.passed_fds and not self.direct:
            return {self.pidfd}
        return {self.pidfd, self.result_r}

    def _init_ended(self) -> bool:
        # The init's end record (``_child.end_branch``): every other process of its pid
        # namespace is dead and reaped and it holds only the result pipe, so with every
        # other stream at EOF and the record whole, nothing of the branch runs but an
        # init about to exit. Not waited for (its heap unmapped, its mounts torn down),
        # unless branch cgroups must be removed (busy until it is gone).
        if self.cgroups.paths or not might_end(self._record):
            return False
        if not {self.pidfd} <= set(self._sel.get_map()) <= self._may_stay_open():
            return False
        code = split_end(bytes(self._record))[1]
        if code is None:
            return False
        self._end_code = code
        return True

    def _drain(self) -> None:
        """The drain thread's body."""
        try:
            self._drain_until(None)
        finally:
            self.done.set()  # even if it broke (an interrupted drain_here): no waiter hangs

    def wait(self, timeout: float | None) -> bool:
        """Wait until the branch has ended (whether it did within ``timeout``): drains
        here when nothing drains yet (``spawn(drain=False)``), which kills the tree at
        ``timeout``; else waits for whoever drains (the caller kills on False)."""
        with self._lock:  # one drainer: a concurrent wait or terminate waits for this one
            mine = self._thread is None and not self._inline and not self.done.is_set()
            if mine:
                self._inline = True
        if mine:
            return self._drain_here(timeout)
        return self.done.wait(timeout)

    def _drain_here(self, timeout: float | None) -> bool:
        """Drain in the calling thread until the branch has ended: a synchronous caller
        then needs no drain thread and no wake-up from one (``spawn(drain=False)``).

        At ``timeout`` the tree is killed (``terminate``'s escalation: the lifeline,
        then after 5 s the keeper and the cgroups) and False is returned once it has
        ended. Interrupted (^C), the tree is killed and a thread finishes the draining.
        """
        try:
            return self._drain_until(None if timeout is None else time.monotonic() + timeout)
        except BaseException:
            self.kill_tree()
            with self._lock:
                self._inline = False
            if not self.done.is_set():
                self._hand_to_thread()
            raise
        finally:
            self._inline = False

    def _hand_to_thread(self) -> None:
        """A drain thread goes on from where the draining stands, unless something
        drains already (decided under ``_lock``, as ``wait`` decides)."""
        with self._lock:
            if self._thread is not None or self._inline or self.done.is_set():
                return
            self._thread = threading.Thread(
                target=self._drain, name=f"forkdeck-sandbox-{self.pid}", daemon=True
            )
        self._thread.start()

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
                    continue
                self._read_some(fd)
                if self._exited:  # the pidfd came first in this batch: only read the rest
                    continue
                if self._command_over():
                    status = 0  # what the keeper exits with after an exit record
                elif self._init_ended():
                    status = self._end_code << 8  # what the init (and keeper) exit with
                else:
                    continue
                sel.unregister(self.pidfd)
                self._status = status
                self._exited = self._early = True
                break
        self._drain_rest()
        self._end()
        return in_time

    def _end(self) -> None:
        self._sel.close()
        for fd in self._streams:
            PARENT_FDS.discard(fd)
            os.close(fd)
        info, status = self.info, self._status
        if os.WIFSIGNALED(status):
            info.signal = os.WTERMSIG(status)
        else:
            info.exit_code = os.waitstatus_to_exitcode(status)
        info.record = split_end(bytes(self._record))[0]  # (the end record is ours)
        info.oom_killed = self.cgroups.oom_killed()
        self.kill_tree()
        self.cgroups.remove()
        with self._lock:
            PARENT_FDS.discard(self.pidfd)
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
        """The keeper's pid, or the init's when it was forked straight into its pid
        namespace (killing either kills the whole sandbox)."""
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

