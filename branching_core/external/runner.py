"""``AgentRun``: one external agent working in one workspace branch, on a pseudo-terminal.

The agent runs in a branch sandbox that shows the branch at the workspace's own path
(``mount_at``), so absolute paths, virtualenvs and an agent's per-project state (Claude
Code keys its sessions by working directory) keep working. ``ptyhost.py`` runs inside
the sandbox and gives the agent a terminal; its output (colours kept) arrives here line
by line, is kept bounded (the last ``max_lines`` lines), scanned for the cost the agent
reports, and handed to ``on_line``. ``steer`` types text on the agent's terminal.
Killing the run kills the sandbox's whole process tree; the branch itself belongs to
the caller (``race`` aborts every branch it does not land).
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branching_core.errors import error_name
from branching_core.external.profiles import AgentProfile, ProfileError
from branching_core.sandbox import ResourceLimits, SandboxedCommand, parse_memory

PTYHOST = str(Path(__file__).with_name("ptyhost.py"))
STEER_FD = 3
# Claude Code's stream-json ("session_id": "..."), Codex's banner ("session id: ...").
_SESSION_RE = re.compile(r'"session_id"\s*:\s*"([A-Za-z0-9_.:-]{1,128})"'
                         r'|^session id:\s*([0-9A-Za-z-]{8,128})\s*$')
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(\x07|\x1b\\)|\x1b[@-_]")

LineCallback = Callable[[str, str], None]  # (label, line with its colours)


def strip_ansi(text: str) -> str:
    """``text`` without terminal control sequences (for matching and plain logs)."""
    return _ANSI_RE.sub("", text)


@dataclass
class RunStatus:
    """Where a run stands: ``running``, ``exited`` (see ``exit_code``), ``timed-out``,
    ``over-budget``, ``killed`` (by the caller) or ``failed`` (it could not start)."""

    state: str = "running"
    exit_code: int | None = None
    error: str | None = None


def _limits(profile: AgentProfile, default: ResourceLimits | None) -> ResourceLimits | None:
    """The profile's own limits, else ``default`` (the command line's)."""
    if profile.memory is None and profile.cpu is None and profile.pids is None:
        return default
    memory = parse_memory(profile.memory) if profile.memory is not None else None
    return ResourceLimits(memory=memory, cpu=profile.cpu, pids=profile.pids)


def find_executable(name: str, env: dict[str, str]) -> str:
    """``name`` resolved on the agent's ``PATH``; a clear error when it is not installed."""
    if os.sep in name:
        if os.access(name, os.X_OK):
            return name
        raise ProfileError(f"agent command {name!r} is not an executable file")
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is None:
        raise ProfileError(f"agent command {name!r} not found on PATH (is it installed?)")
    return found


class AgentRun:
    """One agent in one branch; starts on construction (see the module docstring).

    ``branch`` is a ``Workspace`` branch (anything with ``path`` and ``id``); the run
    never commits or aborts it. ``session`` resumes that saved session into a new one
    (the profile's ``resume`` command). Raises ``ProfileError`` when the agent's command
    cannot be found, before anything starts.
    """

    def __init__(
        self,
        label: str,
        profile: AgentProfile,
        branch: Any,
        prompt: str,
        *,
        mount_at: str | os.PathLike[str] | None = None,
        session: str | None = None,
        on_line: LineCallback | None = None,
        max_lines: int = 2000,
        cols: int = 120,
        rows: int = 40,
        env: dict[str, str] | None = None,
        limits: ResourceLimits | None = None,
    ) -> None:
        self.label = label
        self.profile = profile
        self.ws_branch = branch
        self.branch_id = str(getattr(branch, "id", label))
        self.prompt = prompt
        self.status = RunStatus()
        self.cost_usd: float | None = None
        self.session_id: str | None = None  # the agent's own session, where it prints one
        self.lines: collections.deque[str] = collections.deque(maxlen=max_lines)
        self.lines_seen = 0
        self.on_line = on_line
        self._lock = threading.Lock()
        self._cost_res = [re.compile(p) for p in profile.cost_patterns]
        child_env = profile.environment() if env is None else dict(env)
        argv = profile.argv(prompt, session)
        argv[0] = find_executable(argv[0], child_env)
        steer_r, self._steer_w = os.pipe()
        os.set_inheritable(steer_r, False)
        self.started = time.monotonic()
        self.ended: float | None = None
        try:
            self.proc = SandboxedCommand(
                [sys.executable, "-I", PTYHOST, "--cols", str(cols), "--rows", str(rows),
                 "--steer-fd", str(STEER_FD), "--", *argv],
                branch.path,
                limits=_limits(profile, limits),
                network=profile.network,
                env=child_env,
                mount_at=mount_at,
                on_output=self._output,
                extra_fds={STEER_FD: steer_r},
                expose=profile.exposed_paths(),
                pty=True,
            )
        except BaseException:
            os.close(self._steer_w)
            raise
        finally:
            os.close(steer_r)
        if profile.prompt_on_stdin:  # typed, then end-of-file (^D at a line's start)
            self._type(prompt.replace("\r", "") + "\n\x04")

    # -- output ---------------------------------------------------------------------------
    def _output(self, stream: str, line: str) -> None:
        line = line.rstrip("\r")
        with self._lock:
            self.lines.append(line)
            self.lines_seen += 1
        if self.session_id is None and "session" in line:
            found = _SESSION_RE.search(strip_ansi(line))
            if found:
                self.session_id = found.group(1) or found.group(2)
        if self._cost_res and "cost" in line.lower():
            plain = strip_ansi(line)
            for pattern in self._cost_res:
                match = pattern.search(plain)
                if match:
                    with contextlib.suppress(ValueError):
                        self.cost_usd = float(match.group(1))
        if self.on_line is not None:
            self.on_line(self.label, line)

    def tail(self, count: int = 20) -> list[str]:
        """The last ``count`` lines the agent wrote (colours kept)."""
        with self._lock:
            return list(self.lines)[-count:]

    # -- control --------------------------------------------------------------------------
    def _type(self, text: str) -> bool:
        with self._lock:
            if self._steer_w < 0:
                return False
            try:
                os.write(self._steer_w, text.encode())
                return True
            except OSError:  # the agent is gone (EPIPE)
                return False

    def _close_steer(self) -> None:
        with self._lock:
            fd, self._steer_w = self._steer_w, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def steer(self, text: str) -> bool:
        """Type ``text`` (and Enter) on the agent's terminal. False when this agent reads
        no input while it works (its profile says ``steer = false``) or has ended."""
        if not self.profile.steer or not self.running:
            return False
        return self._type(text.replace("\r", "") + "\n")

    @property
    def running(self) -> bool:
        return self.status.state == "running" and self.proc.exit_code is None

    def poll(self) -> bool:
        """Update the status from the process; True once the run has ended."""
        if self.status.state != "running":
            return True
        code = self.proc.exit_code
        if code is None:
            return False
        try:
            code = self.proc.wait(0)
        except Exception as exc:  # the sandbox never ran the agent
            self._finish("failed", None, f"{error_name(exc)}: {exc}")
            return True
        self._finish("exited", code)
        return True

    def _finish(self, state: str, code: int | None, error: str | None = None) -> None:
        with self._lock:
            if self.status.state != "running":
                return
            self.status = RunStatus(state, code, error)
            self.ended = time.monotonic()
        self._close_steer()

    def kill(self, state: str = "killed", reason: str | None = None) -> None:
        """Kill the agent and every process it started (the branch stays the caller's)."""
        self.proc.abort()
        self._finish(state, self.proc.exit_code, reason)

    @property
    def duration(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def close(self) -> None:
        """Make sure nothing of the run is left (idempotent)."""
        if self.status.state == "running" and not self.poll():
            self.kill()
        self.proc.abort()
        self._close_steer()


__all__ = ["PTYHOST", "AgentRun", "LineCallback", "RunStatus", "find_executable", "strip_ansi"]
