"""Hold terminal signals back while a commit publishes, then deliver them.

Between a commit's journal and its last rename the parent is half old, half new. A
SIGKILL there is safe (the journal is rolled forward at the next open), but Python
turns SIGINT into a ``KeyboardInterrupt`` raised at any bytecode, which unwound the
commit half way and let cleanup throw the branch (and the sources still in it) away.
While this context is active the usual terminal signals are only recorded; they are
delivered, with the handlers that were there before, when it ends.

Python runs signal handlers in the main thread only, so a commit in another thread
needs nothing: the signal lands in the main thread, and whatever cleanup it starts
waits for the branch's lock, which the commit holds.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Generator
from types import FrameType
from typing import Any

DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# what signal.signal returns: a callable, SIG_DFL/SIG_IGN, or None (set outside Python)
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


@contextlib.contextmanager
def deferred_signals() -> Generator[None, None, None]:
    """Record SIGINT/SIGTERM/SIGHUP instead of acting on them; act on them at the end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def record(signum: int, _frame: object) -> None:
        received.append(signum)

    previous: dict[int, _Handler] = {}
    try:
        for signum in DEFERRED:
            try:
                previous[signum] = signal.signal(signum, record)
            except (ValueError, OSError):  # not the main interpreter, or not settable
                continue
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(received):
            signal.raise_signal(signum)


__all__ = ["DEFERRED", "deferred_signals"]
