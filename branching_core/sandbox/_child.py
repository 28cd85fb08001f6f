# pyright: strict
"""The child's end of the sandbox protocol (``_spawn``'s docstring): the keeper (joins the
cgroups, enters the namespaces, forks the init, waits, kills on the lifeline's EOF), the
pid-namespace init (builds the filesystem, runs the target, ends the rest of its branch
before its end record), and ``direct_init``, both in one process when the caller's
forking thread forks the init straight into its namespace. Everything here runs
between fork and the target, so only ``os``, ``select``, ``signal`` and the ctypes
syscalls are used: the caller may be multi-threaded and no lock may be touched."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import signal
from collections.abc import Callable
from select import POLLHUP, POLLIN
from select import poll as select_poll
from typing import TYPE_CHECKING, NoReturn

from branching_core.sandbox import _syscalls as sc
from branching_core.sandbox._records import TAG_SETUP, write_end, write_record
from branching_core.sandbox.namespaces import (
    SandboxPlan,
    build_filesystem,
    enter_namespaces,
    finish_isolation,
)

if TYPE_CHECKING:  # (cgroups only for annotations)
    pass


ChildMain = Callable[[SandboxPlan, int], int]
"""Runs in the init after isolation; gets the plan and the result fd, returns the exit code."""


def setup_failure(fd: int, kind: str, message: str) -> NoReturn:
    with contextlib.suppress(OSError):
        write_record(fd, TAG_SETUP, kind.encode(), message.encode("utf-8", "replace"))
    os._exit(125)


def move_high(fd: int, floor: int) -> int:
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)



def place_fds(plan: SandboxPlan, fd_map: dict[int, int], result_w: int, lifeline_r: int,
              close_fds: bool) -> tuple[int, int]:
    """Put each of the target's fds at its number (``fd_map``: number -> our fd), move
    the result and lifeline ends and the plan's namespace fds above them, close the
    sources (and, with ``close_fds``, everything else); the new (result, lifeline)."""
    try:
        floor = max([10, *fd_map]) + 1
        old_result_w, old_lifeline_r = result_w, lifeline_r
        result_w = move_high(result_w, floor)
        lifeline_r = move_high(lifeline_r, floor)
        if plan.userns_fd is not None:
            plan.userns_fd = move_high(plan.userns_fd, floor)
        if plan.mntns_fd is not None:
            plan.mntns_fd = move_high(plan.mntns_fd, floor)
        if plan.netns_fd is not None:
            plan.netns_fd = move_high(plan.netns_fd, floor)
        moved = {target: move_high(src, floor) for target, src in fd_map.items()}
        originals = set(fd_map.values()) | {old_result_w, old_lifeline_r}
        for target, src in moved.items():
            os.dup2(src, target, inheritable=True)
        keep = {result_w, lifeline_r, *plan.child_fds, *moved}
        for fd in set(moved.values()) | (originals - keep):
            with contextlib.suppress(OSError):
                os.close(fd)
        if close_fds:
            close_all_but(keep)
    except BaseException as exc:
        setup_failure(result_w, "namespace", f"preparing the child's fds failed: {exc}")
    return result_w, lifeline_r


def join_cgroups(cgroup_procs: list[str], result_w: int) -> None:
    """Move this process into each branch cgroup (its children follow it)."""
    try:
        for procs in cgroup_procs:
            fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
    except OSError as exc:
        setup_failure(result_w, "limits", f"joining cgroup {exc.filename}: {exc.strerror}")


def keeper(
    plan: SandboxPlan,
    cgroup_procs: list[str],
    fd_map: dict[int, int],
    result_w: int,
    lifeline_r: int,
    close_fds: bool,
    child_main: ChildMain,
) -> NoReturn:
    """Body of the keeper process; never returns."""
    os.setsid()  # out of the caller's terminal job: a ^C is the caller's to decide
    result_w, lifeline_r = place_fds(plan, fd_map, result_w, lifeline_r, close_fds)
    join_cgroups(cgroup_procs, result_w)
    try:
        enter_namespaces(plan)
    except OSError as exc:
        setup_failure(result_w, "namespace", f"creating namespaces failed: {exc.strerror or exc}")
    plan.close_fds()
    # No core dump when the keeper re-raises its init's fatal signal. Only now: a
    # non-dumpable process cannot open its own /proc/self/uid_map.
    sc.prctl(sc.PR_SET_DUMPABLE, 0)
    try:
        init_pid = os.fork()
    except OSError as exc:
        setup_failure(result_w, "namespace", f"forking the sandbox init failed: {exc}")
    if init_pid == 0:
        init_main(plan, result_w, lifeline_r, child_main)
    # Nothing of the caller's stays here, ``close_fds`` or not (the keeper runs no target
    # code): every fd but the streams' write ends goes first (passed fds and, without
    # ``close_fds``, every fd the caller had), then the streams, the result pipe last.
    # The caller has its answer only once the streams are at EOF (and, with passed fds,
    # the result pipe), so by then no copy of any fd of its own is held here either. A
    # keeper that closed only the target's fds kept a close_fds=False caller's others
    # until its exit, which an early end (the init's end record) no longer waits for.
    close_all_but({result_w, lifeline_r})
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.close(fd)
    os.close(result_w)
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


def close_all_but(keep: set[int]) -> None:
    fds = sorted({0, 1, 2} | keep)
    prev = 0
    for fd in fds:
        if fd > prev:  # os.closerange(n, n) would close everything (close_range(n, ~0))
            os.closerange(prev, fd)
        prev = fd + 1
    os.closerange(prev, 1 << 20)


def direct_init(
    plan: SandboxPlan,
    cgroup_procs: list[str],
    fd_map: dict[int, int],
    result_w: int,
    lifeline_r: int,
    close_fds: bool,
    child_main: ChildMain,
    netns: int | None,
) -> NoReturn:
    """Body of an init born in its new pid namespace (the one-fork shape, ``_forker``):
    the keeper's setup and the init's, in one process; never returns.

    Its parent is the caller's forking thread, which lives as long as the caller: the
    parent-death signal replaces the keeper's lifeline watch. The lifeline is read once,
    after that signal is armed: at EOF the caller died (or aborted) before it was.
    """
    gc.freeze()  # (see ``isolate_and_run``)
    os.setsid()  # out of the caller's terminal job: a ^C is the caller's to decide
    sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
    if netns is not None:  # joined like a branch's own namespace (lo is up in it)
        plan.netns_fd = netns
    result_w, lifeline_r = place_fds(plan, fd_map, result_w, lifeline_r, close_fds)
    poller = select_poll()
    poller.register(lifeline_r, POLLIN | POLLHUP)
    if poller.poll(0):  # EOF (nothing is ever written): the caller is gone or gave up
        os._exit(125)
    os.close(lifeline_r)
    join_cgroups(cgroup_procs, result_w)
    try:
        enter_namespaces(plan, init=True)
    except OSError as exc:
        setup_failure(result_w, "namespace", f"creating namespaces failed: {exc.strerror or exc}")
    plan.close_fds()
    isolate_and_run(plan, result_w, child_main)


def init_main(plan: SandboxPlan, result_w: int, lifeline_r: int, child_main: ChildMain) -> NoReturn:
    """Body of the pid-namespace init; never returns."""
    gc.freeze()  # (see ``isolate_and_run``)
    try:
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        sc.prctl(sc.PR_SET_DUMPABLE, 1)  # the keeper's setting: /proc/self must stay ours
        os.close(lifeline_r)
    except OSError as exc:
        setup_failure(result_w, "namespace", f"sandbox setup failed: {exc.strerror or exc}")
    isolate_and_run(plan, result_w, child_main)


def isolate_and_run(plan: SandboxPlan, result_w: int, child_main: ChildMain) -> NoReturn:
    """The init's last setup (the filesystem, hostname, loopback, capabilities), then the
    target; never returns.

    The init froze the heap it inherited (``gc.freeze``, O(1)) as it started: a
    collection in the setup or the target then never walks, and so never copies page by
    page, the caller's objects (the target's own are collected as usual).
    """
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        build_filesystem(plan)
        finish_isolation(plan)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        setup_failure(result_w, "namespace", f"sandbox setup failed: {exc.strerror or exc}{where}")
    except BaseException as exc:
        setup_failure(result_w, "namespace", f"sandbox setup failed: {exc!r}")
    try:
        code = child_main(plan, result_w)
    except BaseException:
        code = 1
    end_branch(result_w, code)


def end_branch(result_w: int, code: int) -> NoReturn:
    """Exit with ``code``; first, when this init runs a single thread, end the rest of
    the branch and say so (``_records.write_end``): every fd but the result pipe is
    closed, every other process of the pid namespace killed and reaped. The caller then
    has all it waits for once the record is in, and need not wait for this process's
    own exit (unmapping the inherited heap, tearing down the mounts). A target that left
    threads running gets no such record: the caller waits for the exit as before."""
    if _single_threaded():
        try:
            os.closerange(0, result_w)
            os.closerange(result_w + 1, 1 << 20)
            sc.end_pid_namespace()
            write_end(result_w, code & 0xFF)  # what a wait would see of os._exit(code)
        except BaseException:  # (an exit without the record: the caller waits for it)
            pass
    os._exit(code)


def _single_threaded() -> bool:
    """Whether this process runs one thread (its ``/proc/self/status`` says so)."""
    try:
        fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
        try:
            status = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return False
    return b"\nThreads:\t1\n" in status


