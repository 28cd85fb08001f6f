"""The error hierarchy of forkdeck's engine.

It follows BranchContext's hierarchy (so code written against it keeps catching the
same classes) and adds the specific classes a caller needs to tell bad input apart
from a real failure. Every message is meant to fit on one line.
"""

from __future__ import annotations

from collections.abc import Sequence


class BranchingError(Exception):
    """Base for every error raised by forkdeck's engine."""


class WorkspaceError(BranchingError):
    """The workspace itself is unusable (missing path, not a directory, ...)."""


class WorkspaceNotFoundError(WorkspaceError):
    """The workspace path does not exist."""


class WorkspaceNotADirectoryError(WorkspaceError):
    """The workspace path exists but is not a directory."""


class BackendUnavailableError(WorkspaceError):
    """No copy-on-write backend can serve this workspace; the message names each one tried."""

    def __init__(self, message: str, reasons: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.reasons = dict(reasons or {})


class MountError(BranchingError):
    """A filesystem mount or unmount failed."""


class BranchError(BranchingError):
    """A branch operation failed."""


class InvalidBranchNameError(BranchError):
    """A branch name is empty or contains '/', '..' or NUL."""


class BranchStaleError(BranchError):
    """A sibling branch was already committed, so this one can no longer be used."""


class BranchNotFoundError(BranchError):
    """The branch does not exist (or no longer exists)."""


class BranchClosedError(BranchError):
    """The branch was already committed or aborted."""


class OpenChildrenError(BranchError):
    """The branch still has open child branches; commit or abort them first."""


class CommitError(BranchError):
    """A commit failed; the parent is left exactly as it was."""


class ConflictError(CommitError):
    """The commit would overwrite something it must not.

    Either a sibling already committed (first-winner-commit; ``stale`` is true) or
    paths this branch changed were also changed in the parent since the branch was
    created (``paths`` lists them).
    """

    def __init__(self, message: str, paths: Sequence[str] = (), *, stale: bool = False) -> None:
        super().__init__(message)
        self.paths = list(paths)
        self.stale = stale


class UnsafeChangeError(CommitError, ValueError):
    """A change offered for landing is refused as a whole, before anything is applied.

    Raised by the one landing rule (``workspace.guard``) for every landing path (a branch
    commit, a fork merge, a combine, a sub-agent's result, a Ray node's delta, an IDE save
    relayed from the mirror): a path that is absolute, holds ``..`` or NUL, names
    forkdeck's own state, passes through a symlink inside the root it lands in (one the
    same change made included), an entry that is a device, FIFO or socket, or a change
    bigger than the bounds. ``paths`` names what was refused. A ``ValueError`` too: it is
    bad input, and callers that validated paths before caught that.
    """

    def __init__(self, message: str, paths: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.paths = list(paths)


class AbortError(BranchError):
    """An abort failed."""


class ProcessBranchError(BranchingError):
    """A sandboxed child process failed.

    ``exception`` is the child's real exception object when it could be sent back,
    ``exc_type`` its qualified type name and ``child_traceback`` its traceback text.
    """

    def __init__(
        self,
        message: str,
        *,
        exception: BaseException | None = None,
        exc_type: str | None = None,
        child_traceback: str | None = None,
        exit_code: int | None = None,
        signal: int | None = None,
        oom_killed: bool = False,
    ) -> None:
        super().__init__(message)
        self.exception = exception
        self.exc_type = exc_type
        self.child_traceback = child_traceback
        self.exit_code = exit_code
        self.signal = signal
        self.oom_killed = oom_killed


class ProcessForkError(ProcessBranchError):
    """``os.fork()`` failed while starting a sandboxed process (not a fork of an agent run)."""


ForkError = ProcessForkError
"""The seed specification's name for :class:`ProcessForkError` (kept so seed code runs)."""


class NamespaceError(ProcessBranchError):
    """The sandbox could not be set up (namespaces, mounts)."""


class ResourceLimitError(ProcessBranchError):
    """Asked-for resource limits cannot be enforced here; the message says why."""


class MemoryBranchError(BranchingError):
    """Memory branching failed."""


class ConfigError(BranchingError):
    """A settings file or value is invalid; ``key`` names the offending setting."""

    def __init__(self, message: str, *, key: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.path = path



class BranchExecutionError(BranchError):
    """A sub-agent branch (``branching_core.live.subagents``) did not produce its result.

    Raised by programmatic ``branch(...)``; ``__cause__`` is what actually went wrong (a
    ``TimeoutError``, the model's error, a ``ValidationError`` of the input...), ``name`` the
    sub-agent and ``run`` its ``SubAgentRun`` record (transcript, state, usage), if it ran.
    """

    def __init__(self, message: str, *, name: str | None = None, run: object = None) -> None:
        super().__init__(message)
        self.name = name
        self.run = run


__all__ = [
    "AbortError",
    "BackendUnavailableError",
    "BranchClosedError",
    "BranchError",
    "BranchExecutionError",
    "BranchNotFoundError",
    "BranchStaleError",
    "BranchingError",
    "CommitError",
    "ConfigError",
    "ConflictError",
    "ForkError",
    "InvalidBranchNameError",
    "MemoryBranchError",
    "MountError",
    "NamespaceError",
    "OpenChildrenError",
    "ProcessBranchError",
    "ProcessForkError",
    "ResourceLimitError",
    "UnsafeChangeError",
    "WorkspaceError",
    "WorkspaceNotADirectoryError",
    "WorkspaceNotFoundError",
]

