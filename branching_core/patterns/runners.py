"""Where a pattern's candidates run: the ``Runner`` protocol and the local runner.

A pattern (``_runner.CandidateScheduler`` underneath) decides *what* runs and when it wins; a
runner decides *where*. For each pattern call the runner opens a ``RunSession`` on
the parent (the workspace or an open branch). The session makes each candidate's
branch (an object with ``path``, ``is_open``, ``commit()`` and ``abort()``) and
starts the candidate in it, returning a handle (``run(timeout)`` / ``kill()``, see
``_proc``). A remote branch names its node in ``cluster_node_id``; the pattern
copies it into ``SpeculationResult.node_id``.

``LocalRunner`` is today's behaviour: real copy-on-write branches of the parent on
this machine, a thread, a fork or the sandbox per candidate. ``branching_core.cluster``
implements the same protocol on Ray; nothing in this package imports Ray.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from branching_core.patterns._proc import ChildProcessHandle, Handle, SandboxHandle, ThreadHandle
from branching_core.sandbox.limits import ResourceLimits

Evaluate = Callable[[Any], float]


class RunSession(Protocol):
    """One pattern call's view of a runner (see the module docstring)."""

    def branch(self, owner: Any, name: str) -> Any:
        """A new branch named ``name`` under ``owner`` (the parent or a kept branch)."""
        ...

    def branch_many(self, parent: Any, names: Sequence[str]) -> list[Any] | None:
        """All of ``names`` at once under ``parent``, or ``None`` to make them one by one."""
        ...

    def start(self, job: Any, branch: Any, mode: str, limits: ResourceLimits | None) -> Handle:
        """Start ``job`` (a ``_runner.Job``) in ``branch``; ``mode`` is thread/fork/sandbox."""
        ...

    def evaluate(self, evaluate: Evaluate, branch: Any) -> float:
        """The pattern's ``evaluate`` applied to a finished candidate's tree."""
        ...

    def close(self) -> None:
        """Release what the session holds (nothing of ours may keep running)."""
        ...


@runtime_checkable
class Runner(Protocol):
    """Opens a ``RunSession`` for one pattern call on ``parent``."""

    def session(
        self, parent: Any, *, timeout: float | None, deadline: float | None,
        evaluate: Evaluate | None,
    ) -> RunSession:
        """``timeout`` per candidate, ``deadline`` (monotonic) for the whole call, and the
        pattern's ``evaluate``, for runners that must score where the tree is."""
        ...


class LocalSession:
    """Candidates in branches of ``parent`` on this machine (the default)."""

    def branch(self, owner: Any, name: str) -> Any:
        return owner.branch(name, on_success=None, on_error=None)

    def branch_many(self, parent: Any, names: Sequence[str]) -> list[Any] | None:
        if not hasattr(parent, "branch_many"):
            return None
        return list(parent.branch_many(list(names), on_success=None, on_error=None))

    def start(self, job: Any, branch: Any, mode: str, limits: ResourceLimits | None) -> Handle:
        if job.start is not None:
            return job.start(branch)
        assert job.fn is not None
        launch = getattr(job.fn, "launch", None)
        if launch is not None:  # a command candidate (the CLI's): it runs itself
            return launch(branch)
        if mode == "sandbox":
            return SandboxHandle(job.fn, branch.path, limits)
        if mode == "fork":
            return ChildProcessHandle(job.fn, branch.path)
        return ThreadHandle(job.fn, branch.path)

    def evaluate(self, evaluate: Evaluate, branch: Any) -> float:
        return float(evaluate(branch.path))

    def close(self) -> None:
        """Local branches are closed by the pattern runner itself."""


class LocalRunner:
    """Today's runner: every candidate in a copy-on-write branch on this machine."""

    def session(
        self, parent: Any, *, timeout: float | None = None, deadline: float | None = None,
        evaluate: Evaluate | None = None,
    ) -> LocalSession:
        return LocalSession()

    def __repr__(self) -> str:
        return "LocalRunner()"


__all__ = ["LocalRunner", "LocalSession", "RunSession", "Runner"]
