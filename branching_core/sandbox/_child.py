"""The child's end of the sandbox protocol (``_spawn``'s docstring): the keeper (joins the
cgroups, enters the namespaces, forks the init, waits, kills on the lifeline's EOF) and
the pid-namespace init (builds the filesystem, runs the target). Everything here runs
between fork and the target, so only ``os``, ``select``, ``signal`` and the ctypes
syscalls are used: the caller may be multi-threaded and no lock may be touched."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from collections.abc import Callable
from select import POLLHUP, POLLIN
from select import poll as select_poll
from typing import TYPE_CHECKING, NoReturn

from branching_core.sandbox import _syscalls as sc
from branching_core.sandbox._records import TAG_SETUP, write_record
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
    try:
        os.setsid()  # out of the caller's terminal job: a ^C is the caller's to decide
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
    try:
        for procs in cgroup_procs:
            fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
    except OSError as exc:
        setup_failure(result_w, "limits", f"joining cgroup {exc.filename}: {exc.strerror}")
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


def close_all_but(keep: set[int]) -> None:
    fds = sorted({0, 1, 2} | keep)
    prev = 0
    for fd in fds:
        if fd > prev:  # os.closerange(n, n) would close everything (close_range(n, ~0))
            os.closerange(prev, fd)
        prev = fd + 1
    os.closerange(prev, 1 << 20)


def init_main(plan: SandboxPlan, result_w: int, lifeline_r: int, child_main: ChildMain) -> NoReturn:
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
        setup_failure(result_w, "namespace", f"sandbox setup failed: {exc.strerror or exc}{where}")
    except BaseException as exc:
        setup_failure(result_w, "namespace", f"sandbox setup failed: {exc!r}")
    try:
        code = child_main(plan, result_w)
    except BaseException:
        code = 1
    os._exit(code)


