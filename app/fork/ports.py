"""What the fork feature's flows (``lifecycle``, ``steering``, ``diff``, ``commands``) ask
of the chat screen.

Why a protocol: these flows open, steer, end and recover a fork through the fork view
and the session; they read the tab in front but never the chat's own widgets. A fork
can end in a merge (a recovered fork's chosen branch, the diff explorer's combination),
so this is a :class:`app.merge.ports.MergeHost` too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..merge.ports import MergeHost

if TYPE_CHECKING:
    from textual.worker_manager import WorkerManager

    from .fork_area import ForkArea


class ForkHost(MergeHost, Protocol):
    """The screen a fork's flows run on."""

    @property
    def fork_area(self) -> ForkArea | None:
        """The fork's tabs and panels while the fork view is shown."""
        ...

    @property
    def turn_running(self) -> bool:
        """A parent turn is running (a fork waits for it)."""
        ...

    @property
    def workers(self) -> WorkerManager:
        """The running workers (one recovery dialog at a time)."""
        ...

    @property
    def cursor_blink(self) -> bool:
        """Whether text cursors blink in this app (the fork picker's inputs follow it)."""
        ...

    async def until_started(self) -> None:
        """Wait (spinner ``starting``) while the app's start-up is still preparing the
        session; at once when it is ready or nothing prepares it."""
        ...
