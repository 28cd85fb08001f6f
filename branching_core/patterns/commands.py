"""Shell commands as pattern candidates.

A ``CommandCandidate`` is what the runner calls a *command candidate*: instead of
being forked as a Python callable it launches its command directly with the
sandbox's ``SandboxedCommand`` (cwd = the branch view, mounted at the workspace's
real path so the command sees familiar paths), which is what makes the CLI work
on overlay views it could not ``chdir`` into. ``CommandTask`` turns the patterns'
extra arguments (attempt number, feedback) into environment variables.

Public (``from branching_core import CommandCandidate``) because every front door that
races shell commands needs the same thing: the headless CLI and the MCP server's
``explore`` tool build their candidates here rather than each writing its own.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from branching_core.errors import InvalidTypeError
from branching_core.patterns._proc import CandidateTimeout
from branching_core.patterns._runner import Verdict
from branching_core.sandbox.limits import ResourceLimits

Warn = Callable[[str], None]


@dataclass
class CommandOutput:
    """What a finished command left: exit code (negative: signal), output, fd 3."""

    exit_code: int
    stdout: str
    stderr: str
    fd3: str = ""


def parse_score(text: str, success: bool, warn: Warn | None, label: str) -> float | None:
    """The score a command wrote to fd 3; ``None`` (1.0/0.0 fallback) if absent or bad."""
    raw = text.strip()
    if not raw:
        return None
    try:
        return float(raw.split()[-1])
    except ValueError:
        if warn is not None:
            fallback = 1.0 if success else 0.0
            warn(f"{label}: unparsable score {raw[:40]!r} on fd 3; using {fallback}")
        return None


class _CommandHandle:
    def __init__(self, cmd: Any, net: Any = None) -> None:
        self._cmd = cmd
        self._net = net  # the candidate's BranchNetwork (services), closed with it

    def run(self, timeout: float | None) -> CommandOutput:
        try:
            code = self._cmd.wait(timeout)
        except TimeoutError as exc:  # SandboxedCommand.wait killed the tree already
            raise CandidateTimeout(str(exc)) from None
        finally:
            self._cmd.abort()
            if self._net is not None:
                self._net.close()
        return CommandOutput(code, self._cmd.stdout, self._cmd.stderr,
                             self._cmd.fd_output(3).decode("utf-8", "replace"))

    def kill(self) -> None:
        self._cmd.abort()
        if self._net is not None:
            self._net.close()


class CommandCandidate:
    """One command line to run in one branch."""

    def __init__(
        self,
        argv: Sequence[str] | str,
        *,
        workspace_path: str,
        env: Mapping[str, str] | None = None,
        limits: ResourceLimits | None = None,
        score_fd: bool = False,
        warn: Warn | None = None,
        label: str = "candidate",
        on_output: Callable[[str, str], None] | None = None,
        network: Any = False,
    ) -> None:
        self.argv = argv
        self.workspace_path = workspace_path
        self.env = dict(os.environ if env is None else env)
        self.limits = limits
        self.score_fd = score_fd
        self.warn = warn
        self.label = label
        self.on_output = on_output
        # a sandbox network (False/True, "none" | "private" | "host") or a NetworkSetup
        # (``sandbox.net_settings``: the mode plus services each candidate starts for itself)
        self.network = network

    def launch(self, branch: Any) -> _CommandHandle:
        from branching_core.sandbox import SandboxedCommand

        setup, net, network = self.network, None, self.network
        if hasattr(setup, "sandbox_network"):
            network = setup.sandbox_network()
            if any(s.autostart for s in setup.services) and setup.mode != "host":
                # the candidate's own services, in its own namespace, gone with it
                net = setup.for_path(branch.path, label=self.label, limits=self.limits,
                                     mount_at=self.workspace_path,
                                     workspace_root=self.workspace_path)
                network = net.network
        try:
            cmd = SandboxedCommand(
                self.argv, branch.path, limits=self.limits, env=self.env,
                mount_at=self.workspace_path, on_output=self.on_output,
                extra_fds=[3] if self.score_fd else None, network=network or False,
            )
        except BaseException:
            if net is not None:
                net.close()
            raise
        return _CommandHandle(cmd, net)

    def interpret(self, value: CommandOutput) -> Verdict:
        success = value.exit_code == 0
        score = parse_score(value.fd3, success, self.warn, self.label) if self.score_fd else None
        context = None
        if not success:
            tail = (value.stderr.strip() or value.stdout.strip())[-2000:]
            context = f"exit {value.exit_code}: {tail}" if tail else f"exit {value.exit_code}"
        return Verdict(success, score=score, context=context)

    def __call__(self, path: Any) -> Any:  # pragma: no cover - launch() is always used
        raise InvalidTypeError("command candidates are launched, not called")


class CommandTask:
    """A command whose pattern arguments become ``BRANCHING_*`` environment variables.

    ``bind_candidate(attempt)`` (BestOfN, Tournament), ``(attempt, feedback)``
    (Reflexion) or ``(feedback_list)`` (Cascaded) returns one ``CommandCandidate``.
    Every candidate gets ``BRANCHING_ATTEMPT`` (0-based, counting across waves) and
    ``BRANCHING_FEEDBACK`` (empty on a first attempt).
    """

    def __init__(self, argv: Sequence[str] | str, **candidate_options: Any) -> None:
        self.argv = argv
        self.options = candidate_options
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def bind_candidate(self, *args: Any) -> CommandCandidate:
        attempt: int | None = None
        feedback = ""
        for arg in args:
            if isinstance(arg, int):
                attempt = arg
            elif isinstance(arg, str):
                feedback = arg
            elif isinstance(arg, list):
                feedback = "\n".join(str(x) for x in arg)
        if attempt is None:
            with self._lock:
                attempt = next(self._counter)
        base = self.options.get("env") or os.environ
        env = {**base, "BRANCHING_ATTEMPT": str(attempt), "BRANCHING_FEEDBACK": feedback}
        options = {**self.options, "env": env, "label": f"attempt {attempt}"}
        return CommandCandidate(self.argv, **options)

    def __call__(self, *args: Any) -> Any:  # pragma: no cover
        raise InvalidTypeError("command tasks are bound, not called")


__all__ = ["CommandCandidate", "CommandOutput", "CommandTask", "parse_score"]
