"""One event hub for fork branches and sub-agent runs (DESIGN.md: "one event hub").

The engine knows no UI: a ``ForkCoordinator`` and a sub-agent registry publish plain
dataclass events here, and a front end listens. Two ways to listen, both on the event
loop thread: ``add_listener(callback)`` (called synchronously) and ``subscribe()`` (an
``asyncio.Queue`` per subscriber; a full queue drops the event rather than block a run).
A listener that raises is logged and never breaks the run that published the event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

E = TypeVar("E")


class EventHub(Generic[E]):
    """Listeners and subscriber queues for one kind of event (``E``)."""

    def __init__(self, what: str = "event") -> None:
        self._what = what
        self._listeners: list[Callable[[E], None]] = []
        self._queues: list[asyncio.Queue[E]] = []

    def add_listener(self, callback: Callable[[E], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event; returns a function that removes it."""
        self._listeners.append(callback)

        def remove() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return remove

    def subscribe(self, maxsize: int = 0) -> asyncio.Queue[E]:
        """A queue receiving every event from now on."""
        queue: asyncio.Queue[E] = asyncio.Queue(maxsize)
        self._queues.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[E]) -> None:
        with contextlib.suppress(ValueError):
            self._queues.remove(queue)

    def publish(self, event: E) -> None:
        for queue in list(self._queues):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(event)
        for callback in list(self._listeners):
            try:
                callback(event)
            except Exception:  # a broken listener must not break a run
                log.exception("%s listener failed", self._what)


__all__ = ["EventHub"]
