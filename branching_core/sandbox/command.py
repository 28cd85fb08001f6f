"""``SandboxedCommand`` and ``run_command``: a command line in a sandboxed branch.

Used by the CLI (``forkdeck run -- make test``) and by the agent's shell tool. The
command runs as a child of the sandbox's pid-1 init, which reaps orphans and
reports the command's wait status; output is streamed line by line to
``on_output`` as it arrives and accumulated up to ``max_output`` bytes per stream
(head and tail; ``stdout_dropped`` counts the middle). ``extra_fds=[3]`` gives the command a
writable fd 3 whose bytes the caller reads back (``echo 0.95 >&3`` for scores).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeGuard

from branching_core.errors import InvalidArgumentError, TimedOutError
from branching_core.sandbox import _spawn
from branching_core.sandbox._command_init import command_main
from branching_core.sandbox.capture import DEFAULT_MAX_OUTPUT, check_max_output
from branching_core.sandbox.cgroups import create_branch_cgroups
from branching_core.sandbox.limits import ResourceLimits
from branching_core.sandbox.namespaces import parse_view_path, plan_sandbox
from branching_core.sandbox.network import NetworkArg, resolve_network

OutputCallback = Callable[[str, str], None]


def _argv(command: str | Sequence[str]) -> list[str]:
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    argv = [os.fspath(a) for a in command]
    if not argv:
        raise InvalidArgumentError("empty command")
    return argv


@dataclass
class CommandResult:
    """What ``run_command`` returns; ``exit_code`` is negative for a killing signal.

    ``stdout``/``stderr`` hold at most ``max_output`` bytes each (head and tail, with a
    marker line between them); ``*_dropped`` says how many bytes the marker stands for.
    """

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    oom_killed: bool = False
    duration: float = 0.0
    extra: dict[int, bytes] = field(default_factory=dict[int, bytes])
    stdout_dropped: int = 0
    stderr_dropped: int = 0


def _is_fd_map(extra_fds: Iterable[int] | Mapping[int, int] | None
               ) -> TypeGuard[Mapping[int, int]]:
    """``extra_fds`` given as ``{fd in the child: fd here}`` rather than fds to capture."""
    return isinstance(extra_fds, Mapping)


class SandboxedCommand(_spawn.SpawnedProcessView):
    """A command running in its own sandbox; starts on construction.

    ``expose``: ``(path, writable)`` pairs the masks would hide that this command may
    see anyway, each at its own path (see ``namespaces.plan_sandbox``). ``pty``: the
    sandbox gets a private ``/dev/pts`` so the command can open pseudo-terminals.
    """

    def __init__(
        self,
        command: str | Sequence[str],
        workspace: str | os.PathLike[str],
        *,
        limits: ResourceLimits | None = None,
        network: NetworkArg = False,
        env: Mapping[str, str] | None = None,
        mount_at: str | os.PathLike[str] | None = None,
        on_output: OutputCallback | None = None,
        extra_fds: Iterable[int] | Mapping[int, int] | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        expose_secrets: bool = False,
        expose: Sequence[tuple[str | os.PathLike[str], bool]] = (),
        pty: bool = False,
        _drain_in_wait: bool = False,
    ) -> None:
        # _drain_in_wait (run_command): no drain thread, ``wait`` drains in its caller's
        # thread; only for a caller that waits right away in the thread that started it.
        self.argv = _argv(command)
        max_output = check_max_output(max_output)
        self.limits = limits or ResourceLimits()
        self.started = time.monotonic()
        self.timed_out = False
        capture: list[int] = []
        passed: dict[int, int] = {}
        if _is_fd_map(extra_fds):
            passed = {int(k): int(v) for k, v in extra_fds.items()}
        elif extra_fds is not None:
            capture = [int(fd) for fd in extra_fds]
        for fd in [*capture, *passed]:
            if fd < 3:
                raise InvalidArgumentError(f"extra fd {fd} would replace stdin/stdout/stderr")
        # network: none | private | host | a branch's NetNamespace (see ``network``)
        self._net = net = resolve_network(network, parse_view_path(workspace)[0])
        try:
            plan = plan_sandbox(workspace, network=net.host, mount_at=mount_at,
                                expose_secrets=expose_secrets, expose=expose, pty=pty)
        except BaseException:
            net.release()
            raise
        try:
            net.apply(plan)
            cgroups = create_branch_cgroups(self.limits)
        except BaseException:
            plan.close_fds()
            net.release()
            raise
        child_env = dict(os.environ if env is None else env)
        child_env["PWD"] = plan.target
        main = command_main(self.argv, child_env)
        try:
            self._branch = _spawn.spawn(
                plan, cgroups, main, close_fds=True, on_output=on_output,
                capture_fds=capture, pass_fds=passed, max_output=max_output,
                command=(self.argv, child_env), drain=not _drain_in_wait,
            )
        except BaseException:
            plan.close_fds()
            cgroups.remove()
            net.release()
            raise
        self.view_path = plan.target

    def fd_output(self, child_fd: int) -> bytes:
        """What the command wrote to a captured extra fd (complete once it has ended;
        head and tail with a marker when it exceeded ``max_output``)."""
        cap = self._b.extra.get(child_fd)
        return b"" if cap is None else cap.getvalue()

    def result(self, code: int) -> CommandResult:
        """The ``CommandResult`` of a finished (or killed) command."""
        return CommandResult(
            exit_code=code, stdout=self.stdout, stderr=self.stderr,
            timed_out=self.timed_out, oom_killed=self.oom_killed, duration=self.duration,
            extra={fd: cap.getvalue() for fd, cap in self._b.extra.items()},
            stdout_dropped=self.stdout_dropped, stderr_dropped=self.stderr_dropped,
        )

    @property
    def exit_code(self) -> int | None:
        """The command's exit code (negative: killed by that signal); None while running."""
        if not self._b.done.is_set():
            return None
        info = self._b.info
        try:
            tag, parts = _spawn.parse_record(info.record)
        except ValueError:
            tag, parts = b"", []
        if tag == _spawn.TAG_EXIT and len(parts) == 1:
            return os.waitstatus_to_exitcode(struct.unpack("<i", parts[0])[0])
        return -info.signal if info.signal is not None else info.exit_code

    def wait(self, timeout: float | None = None) -> int:
        """The exit code; on timeout kill the whole tree and raise ``TimeoutError``.

        Raises ``NamespaceError``/``ResourceLimitError`` if the sandbox could not
        be set up (the command never ran).
        """
        if not self._b.wait(timeout):
            self.timed_out = True
            self.abort()
            raise TimedOutError(f"command {shlex.join(self.argv)!r} timed out after {timeout} s")
        self._net.release()  # a private namespace made for this command ends with it
        error = _spawn.setup_error(self._b.info)
        if error is not None:
            raise error
        code = self.exit_code
        assert code is not None
        return code

    def abort(self, timeout: float = 5.0) -> None:
        """Kill the command and every descendant; wait up to ``timeout`` for cleanup."""
        self._b.terminate(timeout)
        self._net.release()

    @property
    def duration(self) -> float:
        return time.monotonic() - self.started

    def __enter__(self) -> SandboxedCommand:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.abort()


def run_command(
    command: str | Sequence[str],
    workspace: str | os.PathLike[str],
    *,
    timeout: float | None = None,
    limits: ResourceLimits | None = None,
    network: NetworkArg = False,
    env: Mapping[str, str] | None = None,
    mount_at: str | os.PathLike[str] | None = None,
    on_output: OutputCallback | None = None,
    extra_fds: Iterable[int] | Mapping[int, int] | None = None,
    max_output: int = DEFAULT_MAX_OUTPUT,
    expose_secrets: bool = False,
    expose: Sequence[tuple[str | os.PathLike[str], bool]] = (),
    pty: bool = False,
) -> CommandResult:
    """Run ``command`` sandboxed in ``workspace`` and collect what it produced (bounded).

    ``expose_secrets=True`` shows the homes and credential files the sandbox masks by
    default (see ``masks``); use it only for commands that need them. ``network`` is
    ``"none"`` (``False``), ``"private"``, ``"host"`` (``True``) or a branch's
    ``NetNamespace`` to join (see ``network``).
    """
    branch = SandboxedCommand(
        command, workspace, limits=limits, network=network, env=env, mount_at=mount_at,
        on_output=on_output, extra_fds=extra_fds, max_output=max_output,
        expose_secrets=expose_secrets, expose=expose, pty=pty, _drain_in_wait=True,
    )
    with branch:
        try:
            code = branch.wait(timeout)
        except TimeoutError:
            code = branch.exit_code if branch.exit_code is not None else -signal.SIGKILL
        return branch.result(code)


async def run_command_async(
    command: str | Sequence[str],
    workspace: str | os.PathLike[str],
    *,
    timeout: float | None = None,
    **kwargs: Any,
) -> CommandResult:
    """``run_command`` for asyncio callers; cancelling the task kills the sandbox.

    Forking happens in the event loop's thread (the child is isolated right away);
    only the waiting runs in a worker thread, so a cancelled task aborts the tree.
    """
    branch = SandboxedCommand(command, workspace, **kwargs)
    try:
        try:
            code = await asyncio.to_thread(branch.wait, timeout)
        except TimeoutError:
            code = branch.exit_code if branch.exit_code is not None else -signal.SIGKILL
    except BaseException:
        branch.abort()
        raise
    branch.abort()
    return branch.result(code)


__all__ = ["CommandResult", "SandboxedCommand", "run_command", "run_command_async"]
