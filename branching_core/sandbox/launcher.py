"""The owner's side of the launcher: a pre-started fork server for command sandboxes.

Forking the caller for every sandboxed command copies its whole address space
(twice: the keeper, then the init), and an agent process is large. One launcher per
process (``_launcher``: ``python -S -I`` with only the sandbox's fork path imported)
is started lazily at the second command (a one-command process never pays for
it); until it says it is ready, and whenever it
cannot be used, commands take the direct path (a warning is logged once). Callables
(``BranchContext``) always fork the caller: they need its memory.

Nothing is left behind: the launcher's control socket is held only by its owner
(close-on-exec, closed in forked children), so it exits at the owner's exit or death;
every sandbox it started still watches a lifeline only the owner holds. (Not
PR_SET_PDEATHSIG: it fires when the *thread* that started the launcher exits, and the
first commands often come from short-lived worker threads.)
``FORKDECK_LAUNCHER=0`` turns the launcher off; ``FORKDECK_LAUNCHER=wait`` makes the first
command wait for it (up to 30 s) instead of taking the direct path meanwhile.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import logging
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from branching_core.errors import ProcessForkError
from branching_core.sandbox import _spawn
from branching_core.sandbox._launcher import HEADER, MAX_FDS
from branching_core.sandbox.namespaces import SandboxPlan

log = logging.getLogger(__name__)

# Loads only the modules the fork path needs: the packages' __init__ files (which
# import the whole sandbox API, asyncio included) are replaced by bare packages.
BOOT = """\
import sys, types
root = sys.argv[1]
for name in ("branching_core", "branching_core.sandbox", "branching_core.workspace"):
    module = types.ModuleType(name)
    module.__path__ = [root + "/" + name.replace(".", "/")]
    sys.modules[name] = module
from branching_core.sandbox._launcher import serve
serve(int(sys.argv[2]))
"""

ENV_SWITCH = "FORKDECK_LAUNCHER"
ENV_PYTHON = "FORKDECK_LAUNCHER_PYTHON"  # the interpreter to start it with (tests, odd installs)
_SOURCE_ROOT = str(Path(__file__).resolve().parents[2])


class LauncherUnavailable(Exception):
    """The launcher cannot take this request; the caller uses the direct path."""


class Launcher:
    """One launcher process and its control socket, owned by the process that made it."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.state = "starting"  # -> "ready" | "failed"
        self.why = ""
        self._send_lock = threading.Lock()
        self._ready_lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        python = os.environ.get(ENV_PYTHON) or sys.executable
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [python, "-S", "-I", "-c", BOOT, _SOURCE_ROOT, str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            self.proc = None
            self._fail(f"cannot start {python}: {exc.strerror}")
        finally:
            theirs.close()
        self.ctrl = ours
        _spawn._PARENT_FDS.add(ours.fileno())  # forks of the owner drop it

    def _fail(self, why: str) -> None:
        if self.proc is not None:
            self.proc.poll()  # reap it if it has already died (no zombie child left)
        if self.state != "failed":
            self.state, self.why = "failed", why
            log.warning("forkdeck sandbox launcher unavailable (%s); sandboxed commands"
                        " fork this process directly", why)

    def poll_ready(self, timeout: float = 0.0) -> bool:
        """Whether the launcher is ready (waits up to ``timeout`` for its ``R``)."""
        with self._ready_lock:
            return self._poll_ready(timeout)

    def _poll_ready(self, timeout: float) -> bool:
        if self.state != "starting":
            return self.state == "ready"
        self.ctrl.settimeout(timeout)
        try:
            data = self.ctrl.recv(1)
        except (BlockingIOError, TimeoutError):
            return False
        except OSError as exc:
            data, why = b"", exc.strerror
        else:
            why = ""
        finally:
            self.ctrl.settimeout(None)
        if data == b"R":
            self.state = "ready"
            return True
        code = self.proc.wait() if self.proc is not None else None
        self._fail(why or f"it exited with code {code} before it was ready")
        return False

    def start(
        self, plan: SandboxPlan, cgroup_procs: list[str], fd_map: Mapping[int, int],
        result_w: int, lifeline_r: int, argv: list[str], env: dict[str, str],
    ) -> tuple[int, int, int]:
        """Have the launcher fork a keeper; returns (pid, pidfd, status fd).

        Raises ``LauncherUnavailable`` if the request did not reach it (nothing was
        started) and ``ProcessForkError`` if it got the request but failed or died.
        """
        targets = list(fd_map)
        mine, status = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            fds = [status.fileno(), result_w, lifeline_r, *(fd_map[t] for t in targets),
                   *plan.child_fds]
            if len(fds) > MAX_FDS:
                raise LauncherUnavailable(f"{len(fds)} fds to pass")
            payload = pickle.dumps({
                "plan": replace(plan, userns_fd=None, mntns_fd=None), "targets": targets,
                "userns": plan.userns_fd is not None, "mntns": plan.mntns_fd is not None,
                "cgroup_procs": cgroup_procs, "argv": argv, "env": env,
            })
            header = HEADER.pack(len(payload), len(fds))
            with self._send_lock:
                if self.state != "ready" or os.getpid() != self.owner:
                    raise LauncherUnavailable(self.why or "not ready")
                try:
                    sent = self.ctrl.sendmsg(
                        [header + payload],
                        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))],
                    )
                    if sent < len(header) + len(payload):
                        self.ctrl.sendall((header + payload)[sent:])
                except OSError as exc:
                    # Not delivered whole, so never read: the launcher started nothing.
                    self._fail(f"sending a request failed: {exc.strerror or exc}")
                    raise LauncherUnavailable(self.why) from exc
            status.close()
            msg, got, _flags, _addr = socket.recv_fds(mine, 512, 1)
        except BaseException:
            mine.close()
            status.close()
            raise
        if msg[:1] == b"P" and len(msg) == 5 and len(got) == 1:
            return struct.unpack("<i", msg[1:])[0], got[0], mine.detach()
        for fd in got:
            os.close(fd)
        mine.close()
        if msg[:1] == b"E":
            raise ProcessForkError(msg[1:].decode("utf-8", "replace"))
        self._fail("it died while starting a command")
        raise ProcessForkError("the sandbox launcher died while starting the command")

    def start_keeper(
        self, plan: SandboxPlan, cgroup_procs: list[str], fd_map: Mapping[int, int],
        result_w: int, lifeline_r: int, command: tuple[list[str], dict[str, str]],
        child_ends: list[int], parent_ends: list[int],
    ) -> tuple[int, int, int] | None:
        """``spawn()``'s launcher path: :meth:`start`, then the fd bookkeeping the direct
        path does after its fork (``child_ends`` closed here, ``parent_ends`` closed on a
        failure). None when the launcher cannot take the request (the caller forks
        directly; nothing was closed)."""
        try:
            pid, pidfd, status_fd = self.start(
                plan, cgroup_procs, fd_map, result_w, lifeline_r, *command)
        except LauncherUnavailable:
            return None
        except BaseException:
            for fd in child_ends + parent_ends:
                _spawn._PARENT_FDS.discard(fd)
                os.close(fd)
            raise
        _spawn._PARENT_FDS.update((pidfd, status_fd))
        for fd in child_ends:
            os.close(fd)
        plan.close_fds()
        return pid, pidfd, status_fd

    def close(self, timeout: float = 5.0) -> None:
        """Close the control socket (the launcher exits) and reap it."""
        if os.getpid() != self.owner:
            return
        _spawn._PARENT_FDS.discard(self.ctrl.fileno())
        self.ctrl.close()
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.state != "failed":
            self.state, self.why = "failed", "closed"


_lock = threading.Lock()
_current: Launcher | None = None
_requests = 0  # commands this process asked for (the launcher starts at the second)
_forked = False  # a fork of the owner: it uses the direct path rather than start its own


def _after_fork_in_child() -> None:
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") not in ("0", "off", "no", "false")


def get(wait: float = 0.0, *, start: bool = False) -> Launcher | None:
    """This process's ready launcher; None while it starts, when it failed (logged
    once) or when ``FORKDECK_LAUNCHER=0``.

    It is started at the second command of a process (``start=True``, or
    ``FORKDECK_LAUNCHER=wait``: at the first): a process that runs one command, such
    as ``forkdeck run``, would only pay for starting it.
    """
    global _current, _requests
    if _forked or not enabled():
        return None
    waiting = os.environ.get(ENV_SWITCH) == "wait"
    with _lock:
        _requests += 1
        launcher = _current
        if launcher is None:
            if not (start or waiting or _requests >= 2):
                return None
            launcher = _current = Launcher()
    if launcher.state == "starting" and waiting:
        wait = max(wait, 30.0)
    return launcher if launcher.poll_ready(wait) else None


def wait_ready(timeout: float = 30.0) -> Launcher | None:
    """Start the launcher if needed and wait until it is ready (benchmarks, tests)."""
    deadline = time.monotonic() + timeout
    launcher = get(start=True)
    while launcher is None and _current is not None and _current.state == "starting":
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        launcher = get(min(remaining, 0.5), start=True)
    return launcher


def shutdown() -> None:
    """Stop this process's launcher (the next command starts a new one)."""
    global _current
    with _lock:
        launcher, _current = _current, None
    if launcher is not None and not _forked:
        with contextlib.suppress(OSError):
            launcher.close()


atexit.register(shutdown)

__all__ = ["ENV_SWITCH", "Launcher", "LauncherUnavailable", "enabled", "get", "shutdown",
           "wait_ready"]
