"""The one task of a kind that may run at a time on the chat screen (a turn, a ``!cmd``).

Why a module: the parent's turns and ``!cmd`` each hold a single ``asyncio`` task that
Esc cancels and the input queue waits for; that bookkeeping is the same for both, what
the task does is not (``turns.py``, ``shell.py``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ports import ChatHost


class OneTask:
    """Holds the running task (``task``) of one kind on ``screen``."""

    what = "a task"
    """How the notice names it (``"a turn"``, ``"a !command"``)."""

    def __init__(self, screen: ChatHost) -> None:
        self.screen = screen
        self.task: asyncio.Task[Any] | None = None

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def refuse_if_running(self) -> bool:
        """True (and the user told to wait or press Esc) when one runs already."""
        if self.running:
            self.screen.notice(f"{self.what} is running: wait for it, or esc to stop it", "warning")
            return True
        return False

    def stop(self) -> bool:
        """Cancel the running task (Esc); False when none runs."""
        if not self.running:
            return False
        assert self.task is not None
        self.task.cancel()
        return True


__all__ = ["OneTask"]
