# pyright: strict
"""Where a task on a Ray node may be cancelled: only while its candidate runs.

Ray's plain cancel (``ray.cancel(ref)``) reaches a running task as a
``KeyboardInterrupt`` on the worker's main thread (``_thread.interrupt_main``,
through the Python-level SIGINT handler), raised at whatever bytecode runs then.
If the task has been received but has not started executing yet, Ray retries the
cancel two seconds later, so on a busy node the interrupt can land anywhere in the
task's setup too: inside ``Workspace.branch`` (after the branch directory exists,
before the ``try`` that aborts it), or between a candidate's start and the line that
keeps its handle. The branch was then left on the node, or the candidate's process
tree kept running.

``CancelShield`` makes the task body decide: the cancel is deferred everywhere
except in the sections opened with ``shield.cancellable()`` (the candidate's run and
its evaluation). A cancel that came while shielded is raised on entering the next
cancellable section, or when the shield closes; once one cancel has been raised,
later ones are ignored, so the cleanup that follows (kill the tree, abort the
branch, release the cached tree) always runs to its end.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Generator
from types import FrameType, TracebackType
from typing import Any, NoReturn


class CancelShield:
    """Defers ``KeyboardInterrupt`` outside ``cancellable()`` sections (main thread only:
    elsewhere Python delivers no interrupt, and the shield does nothing)."""

    def __init__(self) -> None:
        self._active = False
        self._open = False
        self._pending = False
        self._raised = False
        self._previous: Any = None

    @property
    def cancelled(self) -> bool:
        """A cancel arrived (raised already or still deferred)."""
        return self._pending or self._raised

    def __enter__(self) -> CancelShield:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._on_interrupt)
            self._active = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._active:
            return
        self._active = False
        signal.signal(signal.SIGINT, self._previous)
        if exc_type is None and self._pending and not self._raised:
            # Cancelled during the cleanup-free tail (collecting the delta): the task
            # ends as cancelled, as it would have without the shield.
            self._raised = True
            _raise_cancel()

    def check(self) -> None:
        """Raise the cancel that came while shielded, if one did (once)."""
        if self._pending and not self._raised:
            self._pending, self._raised = False, True
            _raise_cancel()

    @contextlib.contextmanager
    def cancellable(self) -> Generator[None, None, None]:
        """A section a cancel may interrupt (raises at once if one is already pending)."""
        self.check()
        self._open = not self._raised
        try:
            yield
        finally:
            self._open = False

    def _on_interrupt(self, signum: int, frame: FrameType | None) -> None:
        if self._open:
            self._open, self._raised = False, True  # one cancel is raised, not two
            _raise_cancel()
        if not self._raised:
            self._pending = True


def _raise_cancel() -> NoReturn:
    """The cancel as Ray raises it: the task must end in ``KeyboardInterrupt`` for Ray to
    record it as cancelled (``TaskCancelledError`` for the driver), not as failed."""
    raise KeyboardInterrupt


__all__ = ["CancelShield"]
