"""What every feature may ask of the screen it runs on: the session, a modal's answer,
notices, the status line and a worker for a flow that waits on the user.

Why a protocol and not the chat screen's class: a feature that names the concrete
``ChatScreen`` can reach every widget and attribute of it, and imports the one module
that imports every feature (the import cycle issue 23 found). Each feature declares what
it needs on top of this (``chat.ports``, ``fork.ports``, ``merge.ports``); the chat screen
satisfies them all structurally, and pyright checks that it does where it hands itself
over.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.screen import Screen
    from textual.worker import Worker

    from ..session import ChatSession

ResultT = TypeVar("ResultT")


class ScreenHost(Protocol):
    """The screen's part every feature uses."""

    @property
    def session(self) -> ChatSession: ...

    async def ask(self, modal: Screen[ResultT]) -> ResultT:
        """Show ``modal`` and wait for its answer (the screen keeps its own state)."""
        ...

    def notice(
        self, text: str, severity: SeverityLevel = "information", *, toast: bool | None = None
    ) -> None:
        """Say ``text`` in the chat (and the fork's log strip while a fork is shown)."""
        ...

    def refresh_status(self, activity: str | None = None) -> None:
        """Redraw the status line (``activity`` in place of the default one)."""
        ...

    def run_worker(
        self,
        work: Awaitable[None],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
    ) -> Worker[None]:
        """A flow that waits on the user (a modal) while the screen keeps taking keys."""
        ...
