"""``BranchContext``: run a Python callable in a sandboxed child.

The callable is not pickled: the caller is forked (closures work), the child is
isolated (see ``namespaces``), calls ``target(view_path)`` and sends the typed
result back (see ``results``). The API mirrors BranchContext's, fixing its known
weaknesses: the whole process tree dies on abort/timeout/exit, results of any size
arrive without deadlock and keep their type, exceptions keep their class, and
unflushed stdout is not lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from branching_core.errors import (
    InvalidArgumentError,
    InvalidStateError,
    ProcessBranchError,
    TimedOutError,
)
from branching_core.sandbox import _spawn
from branching_core.sandbox.capture import DEFAULT_MAX_OUTPUT, check_max_output
from branching_core.sandbox.cgroups import create_branch_cgroups
from branching_core.sandbox.limits import ResourceLimits
from branching_core.sandbox.namespaces import SandboxPlan, parse_view_path, plan_sandbox
from branching_core.sandbox.network import NetworkArg, NetworkChoice, resolve_network
from branching_core.sandbox.results import decode, encode_exception, encode_value

Target = Callable[[Path], Any]
_UNSET: Any = object()


def _callable_main(target: Target) -> _spawn.ChildMain:
    def main(plan: SandboxPlan, result_fd: int) -> int:
        _spawn.fresh_std_streams()
        code = 0
        try:
            value = target(Path(plan.target))
            meta, payload = encode_value(value)
        except SystemExit as exc:
            if exc.code is None or exc.code == 0:
                meta, payload = encode_value(None)
            else:
                meta, payload = encode_exception(exc)
                code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:
            meta, payload = encode_exception(exc)
            code = 1
        _spawn.flush_std_streams()
        _spawn.write_large_record(result_fd, _spawn.TAG_RESULT, meta, payload)
        return code

    return main


class BranchContext(_spawn.SpawnedProcessView):
    """A callable running in its own sandbox; starts on construction.

    ``target(path)`` gets the branch view's path as seen inside the sandbox (the
    workspace's own path, or ``mount_at``). Use as a context manager: leaving the
    block aborts a child that is still running. ``stdout``/``stderr`` keep at most
    ``max_output`` bytes each (head and tail); the return value is never truncated.
    Homes and credential files are masked unless ``expose_secrets=True``.
    """

    def __init__(
        self,
        target: Target,
        workspace: str | os.PathLike[str],
        *,
        limits: ResourceLimits | None = None,
        close_fds: bool = False,
        network: NetworkArg = False,
        mount_at: str | os.PathLike[str] | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        expose_secrets: bool = False,
        _drain_in_wait: bool = False,
    ) -> None:
        # _drain_in_wait (the patterns' SandboxHandle): no drain thread, ``wait`` drains
        # in its caller's thread; only for a caller that waits soon (its output waits in
        # the pipes until then) and aborts the branch if it never does.
        self._drain_in_wait = _drain_in_wait
        self.max_output = check_max_output(max_output)
        self.expose_secrets = expose_secrets
        self.target = target
        self.workspace = Path(workspace)
        self.limits = limits or ResourceLimits()
        self.close_fds = close_fds
        self.network = network
        self.mount_at = mount_at
        self._branch: _spawn.SpawnedProcess | None = None
        self._outcome: Any = _UNSET
        self._error: BaseException | None = None
        self._aborted = False
        self._net: NetworkChoice | None = None
        self.start()

    def start(self) -> None:
        """Fork the sandbox (called by the constructor, as in BranchContext)."""
        if self._branch is not None:
            raise InvalidStateError("BranchContext already started")
        self._net = net = resolve_network(self.network, parse_view_path(self.workspace)[0])
        try:
            plan = plan_sandbox(self.workspace, network=net.host, mount_at=self.mount_at,
                                expose_secrets=self.expose_secrets)
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
        try:
            self._branch = _spawn.spawn(
                plan, cgroups, _callable_main(self.target), close_fds=self.close_fds,
                max_output=self.max_output, drain=not self._drain_in_wait,
            )
        except BaseException:
            plan.close_fds()
            cgroups.remove()
            net.release()
            raise

    def _release_network(self) -> None:
        if self._net is not None:
            self._net.release()

    @property
    def exit_code(self) -> int | None:
        """The exit status once finished: a negative number is the killing signal."""
        if not self._b.done.is_set():
            return None
        info = self._b.info
        return -info.signal if info.signal is not None else info.exit_code

    @property
    def result(self) -> Any:
        """The return value; raises like ``wait()`` if the child failed or is running."""
        if not self._b.done.is_set():
            raise InvalidStateError("the branch is still running; call wait() first")
        return self._finish()

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the child ends and return its result.

        Raises ``ProcessBranchError`` (the child's exception, type and traceback,
        or how it died), ``NamespaceError``/``ResourceLimitError`` when the sandbox
        could not be set up, and ``TimeoutError`` after killing the whole tree.
        """
        if not self._b.wait(timeout):
            self._aborted = True  # (a draining wait has killed the tree already)
            self.abort()
            raise TimedOutError(f"branch {self.pid} did not finish within {timeout} s; killed")
        self._release_network()
        return self._finish()

    def abort(self, timeout: float = 5.0) -> None:
        """Kill the child and every descendant, and wait (up to ``timeout``) for cleanup."""
        if self._b.terminate(timeout):
            self._aborted = True
        self._release_network()

    def _finish(self) -> Any:
        if self._error is not None:
            raise self._error
        if self._outcome is not _UNSET:
            return self._outcome
        info = self._b.info
        setup = _spawn.setup_error(info)
        if setup is not None:
            self._error = setup
            raise setup
        exit_code = self.exit_code
        try:
            tag, parts = _spawn.parse_record(info.record)
        except ValueError:
            tag, parts = b"", []
        if tag == _spawn.TAG_RESULT and len(parts) == 2:
            decoded = decode(parts[0], parts[1], exit_code=exit_code)
            if decoded.ok:
                self._outcome = decoded.value
                return self._outcome
            assert decoded.error is not None
            self._error = decoded.error
            raise self._error
        if self._aborted and not info.oom_killed:
            self._error = ProcessBranchError(
                "branch aborted", exit_code=exit_code, signal=info.signal
            )
        elif info.signal is not None:
            name = signal.Signals(info.signal).name
            why = " (out of memory: killed by the OOM killer)" if info.oom_killed else ""
            self._error = ProcessBranchError(
                f"branch killed by {name}{why}", exit_code=exit_code, signal=info.signal,
                oom_killed=info.oom_killed,
            )
        else:
            self._error = ProcessBranchError(
                f"branch exited with code {exit_code} without a result",
                exit_code=exit_code, oom_killed=info.oom_killed,
            )
        raise self._error

    def __enter__(self) -> BranchContext:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._branch is not None and self.alive:
            self.abort()
        self._release_network()

    def __del__(self) -> None:
        branch = getattr(self, "_branch", None)
        if branch is not None and not branch.done.is_set():
            with contextlib.suppress(Exception):
                branch.kill_tree()

    @classmethod
    @contextlib.contextmanager
    def create(
        cls,
        targets: Sequence[Target],
        workspaces: Sequence[str | os.PathLike[str]],
        *,
        limits: ResourceLimits | None = None,
        close_fds: bool = False,
        network: NetworkArg = False,
        mount_at: str | os.PathLike[str] | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        expose_secrets: bool = False,
    ) -> Generator[list[BranchContext], None, None]:
        """Start one sandbox per (target, workspace); abort all still running on exit."""
        if len(targets) != len(workspaces):
            raise InvalidArgumentError(f"{len(targets)} targets but {len(workspaces)} workspaces")
        contexts: list[BranchContext] = []
        try:
            for target, ws in zip(targets, workspaces, strict=True):
                contexts.append(cls(target, ws, limits=limits, close_fds=close_fds,
                                    network=network, mount_at=mount_at,
                                    max_output=max_output, expose_secrets=expose_secrets))
            yield contexts
        finally:
            for ctx in contexts:
                ctx.abort()


__all__ = ["BranchContext"]
