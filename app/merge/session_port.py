"""What resolving a fork (``app.merge.resolution``, ``app.merge.outcome``) reads and
changes on the chat session.

Why a protocol: ``ChatSession`` keeps one-line methods (``merge``, ``run_judge``, ...)
that call into ``app.merge.resolution``, so that module naming the session's class made
an import cycle (session -> resolution -> session). The session satisfies these
structurally; pyright checks it where the session passes itself in.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from branching_core.config import Settings
    from branching_core.fork import ForkCoordinator

    from ..fork_totals import ForkTotals


class ForkHolder(Protocol):
    """Something with the live fork's coordinator (None: no fork is open)."""

    @property
    def coordinator(self) -> ForkCoordinator | None: ...


class MergingSession(ForkHolder, Protocol):
    """The session as a fork's resolution sees it (types as ``ChatSession`` declares them)."""

    branch_tests: dict[str, str]
    """Each branch's test line, kept for the merge picker."""
    history: list[Any]
    """The chat's messages (pydantic-ai's, as the session holds them)."""
    merged_messages: list[Any]
    """What the winner's conversation adds to what the chat shows."""

    @property
    def judges(self) -> list[Any] | None: ...

    @property
    def env(self) -> dict[str, str] | None: ...

    @property
    def settings(self) -> Settings: ...

    def busy(self, label: str) -> AbstractContextManager[None]: ...

    def fork_totals(self) -> ForkTotals: ...

    def settle_fork(self, spent: ForkTotals) -> None: ...
