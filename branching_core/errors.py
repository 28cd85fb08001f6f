"""The error hierarchy of forkdeck's engine.

It follows BranchContext's hierarchy (so code written against it keeps catching the
same classes) and adds the specific classes a caller needs to tell bad input apart
from a real failure. Every message is meant to fit on one line.

The engine raises only classes of this tree (``tests/test_error_types.py`` scans for a
bare builtin). Where callers expect a builtin kind, the class is that builtin as well
(in parentheses), so ``except ValueError`` and ``except BranchingError`` both catch it;
the stand-ins marked ``*`` show under the builtin's name in one-line errors
(:func:`error_name`), as they did before. Classes in brackets live beside their code::

    BranchingError
    ├── BranchError
    │   ├── AbortError, BranchClosedError, BranchNotFoundError, BranchStaleError,
    │   │   InvalidBranchNameError, OpenChildrenError, BranchExecutionError
    │   └── CommitError
    │       ├── ConflictError
    │       └── UnsafeChangeError (ValueError)      the one landing rule refused a change
    ├── WorkspaceError
    │   └── BackendUnavailableError, WorkspaceNotFoundError, WorkspaceNotADirectoryError
    ├── MountError ── UmountError                  [workspace.mount_helper]
    ├── ProcessBranchError
    │   ├── NamespaceError ── NetworkUnavailable    [sandbox.netstack]
    │   └── ProcessForkError (= ForkError), ResourceLimitError
    ├── ConfigError, MemoryBranchError
    ├── InvalidArgumentError (ValueError) *         a value is malformed, out of range, unknown
    ├── InvalidTypeError (TypeError) *              an argument of the wrong kind
    ├── InvalidStateError (RuntimeError) *          not now: nothing started, already resolved
    ├── OperationError (RuntimeError) *             git refused, address taken, judge nonsense
    ├── UnsupportedError (NotImplementedError) *    valid, but this runner cannot serve it
    ├── NotFoundError (KeyError) *                  no such checkpoint / mirrored branch
    ├── TimedOutError (TimeoutError) *              a wait ran past its timeout
    ├── SystemCallError (OSError) *                 the system refused; errno kept
    │   └── PathNotFoundError (FileNotFoundError), PathExistsError (FileExistsError),
    │       PathIsDirectoryError (IsADirectoryError), PathNotDirectoryError (NotADirectoryError)
    ├── fork:     CombineError (ValueError) ── CombineConflict, MergeActionError (ValueError),
    │             ForkBranchLimitError (ValueError), ForkDepthLimitError (RuntimeError),
    │             MirrorError                      [fork.combine, .actions, .types, .mirror]
    ├── agent:    UnsafePathError (ValueError), InvalidPatternError (ValueError),
    │             SearchTimeoutError (TimeoutError), BudgetCut
    ├── live:     BudgetExhausted, BudgetUnknown, SubAgentConflict   [live.subagents.runner]
    ├── patterns: CandidateTimeout [patterns._proc]; cluster: CandidateLost, BranchLost,
    │             RayUnavailableError (ImportError)  [cluster]
    ├── sandbox:  NativeUnavailable, ServiceError  [sandbox.native, sandbox.services]
    ├── others:   GitError [gitops], EditorLaunchError [review.editor],
    │             ProfileError (ValueError) [external.profiles], UsageError [cli._common]
    └── private control flow: _Invalid [config.schema], _Bad [config.services]

Builtins that stay (each with its reason in the test's allow-list): a module
``__getattr__``'s ``AttributeError``, errno-mapped ``OSError`` from raw system calls
(the builtin picks ``PermissionError``/``FileNotFoundError`` by errno), the crash-test
fault injection, abstract ``raise NotImplementedError``, and the two programs that run
without the engine (``workspace/_mount_helper_main.py``, ``external/ptyhost.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar


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


# -- Stand-ins for builtins -------------------------------------------------------------
# The engine raises only classes of this module's tree. Where callers (and the engine's
# own ``except ValueError``/``pytest.raises(RuntimeError)``) expect a builtin kind, the
# class below is also that builtin, so both catches keep working. ``error_name`` shows
# such an error under the builtin's name, so one-line errors read as they always did.


class InvalidArgumentError(BranchingError, ValueError):
    """A value given to the engine is malformed, out of range or unknown (a ``ValueError``)."""

    shows_as_builtin: ClassVar[bool] = True


class InvalidTypeError(BranchingError, TypeError):
    """An argument is an object of the wrong kind (a ``TypeError``)."""

    shows_as_builtin: ClassVar[bool] = True


class InvalidStateError(BranchingError, RuntimeError):
    """The call does not fit the current state: nothing started yet, already resolved or
    started, still running, waiting on an answer (a ``RuntimeError``)."""

    shows_as_builtin: ClassVar[bool] = True


class OperationError(BranchingError, RuntimeError):
    """An operation could not be carried out for a reason outside the caller's arguments:
    git refused, the address is taken, a file changed under a snapshot, a judge printed
    nonsense (a ``RuntimeError``)."""

    shows_as_builtin: ClassVar[bool] = True


class UnsupportedError(BranchingError, NotImplementedError):
    """The request is valid but this runner or setup cannot serve it (a ``NotImplementedError``)."""

    shows_as_builtin: ClassVar[bool] = True


class NotFoundError(BranchingError, KeyError):
    """A named item (checkpoint, mirrored branch) does not exist (a ``KeyError``)."""

    shows_as_builtin: ClassVar[bool] = True


class TimedOutError(BranchingError, TimeoutError):
    """A wait on a sandboxed command or branch ran past its timeout (a ``TimeoutError``)."""

    shows_as_builtin: ClassVar[bool] = True


class SystemCallError(BranchingError, OSError):
    """The system refused: the kernel did not keep a limit, a request does not fit, a file
    is not what it must be. An ``OSError`` with ``errno``, ``strerror`` and ``filename``."""

    shows_as_builtin: ClassVar[bool] = True


class PathNotFoundError(SystemCallError, FileNotFoundError):
    """A file the operation needs is gone (a ``FileNotFoundError``)."""


class PathExistsError(SystemCallError, FileExistsError):
    """A file the operation must create is already there (a ``FileExistsError``)."""


class PathIsDirectoryError(SystemCallError, IsADirectoryError):
    """A directory is where a file must be (an ``IsADirectoryError``)."""


class PathNotDirectoryError(SystemCallError, NotADirectoryError):
    """A file is where a directory must be (a ``NotADirectoryError``)."""


def shown_class(cls: type[BaseException]) -> type[BaseException]:
    """The class an error of type ``cls`` shows as: a stand-in above (and its subclasses)
    as the builtin it stands in for, every other class as itself."""
    if getattr(cls, "shows_as_builtin", False):
        for base in cls.__mro__:
            if base.__module__ == "builtins":
                return base
    return cls


def error_name(exc: BaseException) -> str:
    """The class name a one-line error shows for ``exc``: ``ValueError: n must be at least
    1`` for an ``InvalidArgumentError``, as before the engine had its own types."""
    return shown_class(type(exc)).__name__

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
    "InvalidArgumentError",
    "InvalidBranchNameError",
    "InvalidStateError",
    "InvalidTypeError",
    "MemoryBranchError",
    "MountError",
    "NamespaceError",
    "NotFoundError",
    "OpenChildrenError",
    "OperationError",
    "PathExistsError",
    "PathIsDirectoryError",
    "PathNotDirectoryError",
    "PathNotFoundError",
    "ProcessBranchError",
    "ProcessForkError",
    "ResourceLimitError",
    "SystemCallError",
    "TimedOutError",
    "UnsafeChangeError",
    "UnsupportedError",
    "WorkspaceError",
    "WorkspaceNotADirectoryError",
    "WorkspaceNotFoundError",
    "error_name",
    "shown_class",
]

