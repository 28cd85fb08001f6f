# pyright: strict
"""Process machinery shared by the callable and the command form: ``spawn`` and the
protocol it starts, described here once.

The keeper, the init and the caller's side are three ends of one protocol (the lifeline
pipe, the record format, the fork order and the fds each end closes). Each end is a
module of its own, and this docstring is where the protocol they share is written down:

* ``_records.py``  the record format (tags, length-prefixed parts) on the result pipe
* ``_child.py``    the keeper and the pid-namespace init (between fork and the target)
* ``_forker.py``   the caller's forking thread (the one-fork shape below)
* ``_caller.py``   ``SpawnedProcess`` (pipes, pidfd, result), ``SpawnedProcessView``
* ``_spawn.py``    ``spawn``: the fork order and which end closes which fd

A change to one end is checked against this description and the others. The native
executor (``native.py``, ``native/forkdeck_sandbox.c``) is the same keeper and init for
commands, in C: it speaks this protocol, and ``spawn`` starts it instead of forking
when it is given a command.

Shape of a running branch, one of two. A caller that can make pid namespaces itself
(root in its own user namespace, no user namespace to make or join) forks once::

    caller (its forking thread) ──fork──> init (pid 1 of a new pid ns)
                                           └─ target / spawned command

and any other caller (and ``FORKDECK_ONE_FORK=0``) through a keeper::

    caller ──fork──> keeper (outer pid ns) ──fork──> init (pid 1 of a new pid ns)
                                                      └─ target / spawned command

* One fork (``_forker``): one long-lived thread of the caller ``unshare``s
  ``CLONE_NEWPID`` (for its next child only), forks, and ``setns``es back; the child is
  the init from birth and does the keeper's setup itself (its own session, the fds,
  the cgroups, the other namespaces). It sets ``PR_SET_PDEATHSIG=SIGKILL``, which fires
  when the *thread* that forked it exits: the forking thread lives as long as the
  caller, so that is when the caller dies (even by SIGKILL). It then reads the lifeline
  once: at EOF the caller died, or aborted, before the signal was armed, and it exits.
  Abort and timeout SIGKILL the init through its pidfd. The caller reaps the init
  itself: its exit status is the branch's.
* The keeper joins the branch cgroups, enters/unshares the namespaces, forks the
  init, then only waits. It watches a *lifeline* pipe whose write end only the
  caller holds: when the caller closes it (abort, timeout) or dies (even by
  SIGKILL), the keeper SIGKILLs the init, and the kernel kills everything in the
  pid namespace, ``setsid``/double-forked/``nohup`` children included. A pipe is
  used instead of PR_SET_PDEATHSIG on the keeper because PDEATHSIG fires when the
  *thread* that forked exits, and callers fork from short-lived worker threads. The
  init has PR_SET_PDEATHSIG=SIGKILL towards the single-threaded keeper, which re-raises
  the init's fatal signal or exits with its code. Right after forking the init the
  keeper closes every fd of the caller's it holds (passed, inherited without
  ``close_fds``), then the streams' write ends, then the result pipe: once the streams
  are at EOF (and, with passed fds, the result pipe) it holds nothing of the caller's.
* Either way the SIGKILL of the init ends its whole pid namespace, and the init (pid 1)
  reaps every orphan. The Python init freezes the heap it inherited (``gc.freeze``).
* Records on the result pipe (``_records``): ``S`` a setup failure (then exit 125),
  ``R`` a callable's result, ``X`` a command's wait status (written once every other
  process of the pid namespace is dead and reaped); after ``R`` or ``X`` the Python
  init may add ``E`` and its exit code: it runs one thread, has closed every fd but the
  result pipe, and has killed and reaped every other process of its pid namespace, so
  nothing of the branch runs but an init about to exit. With ``E`` (or ``X``) whole
  and every other stream at EOF the caller has its answer and does not wait for that
  exit (unmapping the inherited heap, tearing down the mounts): the init, or the
  keeper, is reaped by a reaper thread. Not with branch cgroups (they can be removed
  only once empty).
* The caller drains stdout, stderr, the result pipe and any extra fds in one
  background thread per branch, or in the thread that waits (``spawn(drain=False)``:
  one drainer, decided under a lock), with no deadlock at any output volume, reaps the
  keeper (or the init) through a pidfd and removes the branch cgroups. Captured streams
  keep only their head and tail (``capture.BoundedCapture``): output volume never grows
  the caller.

Between fork and the target only ``os``, ``select``, ``signal`` and the ctypes
syscalls run: the caller may be multi-threaded, so no lock may be touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NoReturn

from branching_core.errors import (
    NamespaceError,
    ProcessForkError,
    ResourceLimitError,
)
from branching_core.sandbox import _forker, native, steps
from branching_core.sandbox._caller import (
    PARENT_FDS,
    ExitInfo,
    SpawnedProcess,
    SpawnedProcessView,
)
from branching_core.sandbox._child import ChildMain, direct_init, keeper
from branching_core.sandbox._records import (
    TAG_EXIT,
    TAG_RESULT,
    TAG_SETUP,
    parse_record,
    write_large_record,
    write_record,
)
from branching_core.sandbox.capture import DEFAULT_MAX_OUTPUT
from branching_core.sandbox.namespaces import SandboxPlan
from branching_core.sandbox.native import NativeUnavailable

if TYPE_CHECKING:  # (cgroups only for annotations)
    from branching_core.sandbox.cgroups import BranchCgroups


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
    PARENT_FDS.update(parent_ends)
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
        steps.prepare_steps(plan.steps)  # what the init performs: converted here, not in each child
    direct = False
    if pid is None and _one_fork(plan):
        pid = _fork_init(plan, cgroups, child_main, close_fds, fd_map, res_w, life_r,
                         child_ends, parent_ends)
        direct = pid is not None
    if pid is None:
        pid = _fork_keeper(plan, cgroups, child_main, close_fds, fd_map, res_w, life_r,
                           child_ends, parent_ends)
    pidfd = _started(pid, plan, child_ends)
    branch = SpawnedProcess(
        pid=pid, pidfd=pidfd, lifeline_w=life_w, cgroups=cgroups, on_output=on_output,
        capture_fds=capture, stdout_r=out_r, stderr_r=err_r, result_r=res_r,
        max_output=max_output, direct=direct, passed_fds=bool(pass_fds),
    )
    if drain:
        branch.start_drain()
    else:
        branch.prepare_drain()
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
            keeper(plan, cgroups.procs_files, fd_map, res_w, life_r, close_fds, child_main)
        finally:
            os._exit(127)
    return pid


def _one_fork(plan: SandboxPlan) -> bool:
    """Whether the init can be forked straight into its pid namespace (``_forker``): a
    privileged caller whose sandbox makes no user namespace and joins none."""
    return (not plan.new_userns and plan.userns_fd is None and _forker.wanted()
            and _forker.forker().unusable is None)


def _fork_init(
    plan: SandboxPlan, cgroups: BranchCgroups, child_main: ChildMain, close_fds: bool,
    fd_map: dict[int, int], res_w: int, life_r: int,
    child_ends: list[int], parent_ends: list[int],
) -> int | None:
    """The one-fork path: the forking thread forks the init itself; its pid, or None
    when this process cannot (nothing started: the caller forks a keeper)."""
    netns = native.take_netns(plan)  # made ahead, lo up: the init joins it

    def body() -> NoReturn:  # pragma: no cover - runs in the child
        direct_init(plan, cgroups.procs_files, fd_map, res_w, life_r, close_fds,
                    child_main, netns)

    try:
        return _forker.forker().fork(body)
    except OSError as exc:
        _close_ends(child_ends + parent_ends)
        raise ProcessForkError(f"fork() failed: {exc.strerror}") from exc
    except BaseException:
        _close_ends(child_ends + parent_ends)
        raise
    finally:
        if netns is not None:  # the init has its copy (or never ran): used once
            os.close(netns)


def _close_ends(fds: list[int]) -> None:
    for fd in fds:
        PARENT_FDS.discard(fd)
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
    PARENT_FDS.add(pidfd)
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
    "ChildMain",
    "ExitInfo",
    "SpawnedProcess",
    "SpawnedProcessView",
    "flush_std_streams",
    "fresh_std_streams",
    "parse_record",
    "setup_error",
    "spawn",
    "write_large_record",
    "write_record",
]

