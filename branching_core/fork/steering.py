"""Per-branch steering queues.

Each branch owns one :class:`SteeringQueue`. A message put on it reaches that branch's very
next model request and no other branch's: while the branch's ``AgentRun`` is live the
message is handed to pydantic-ai's own pending-message queue (``AgentRun.enqueue`` with
priority ``'asap'``), which its always-on drain capability prepends to the next
``ModelRequest`` (or, if the run was about to end, turns into one more request). Messages
put before the run exists are held and handed over the moment it starts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SteeringQueue:
    """One branch's message queue (``BranchIsolation.message_queue='isolated'``)."""

    _held: list[str] = field(default_factory=list)
    _run: Any = None
    delivered: list[str] = field(default_factory=list)
    """Every message handed to the run, in order (what the branch has been told)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def attached(self) -> bool:
        return self._run is not None and getattr(self._run, "result", None) is None

    def put(self, message: str) -> bool:
        """Queue ``message``; True when it went straight to the live run."""
        with self._lock:
            run = self._run
            if run is not None and getattr(run, "result", None) is None:
                try:
                    run.enqueue(message, priority="asap")
                except Exception:  # the run ended between the check and the call
                    self._held.append(message)
                    return False
                self.delivered.append(message)
                return True
            self._held.append(message)
            return False

    def attach(self, run: Any) -> None:
        """Bind to a live ``AgentRun`` and hand it every held message."""
        with self._lock:
            self._run = run
            held, self._held = self._held, []
            for message in held:
                run.enqueue(message, priority="asap")
                self.delivered.append(message)

    def detach(self) -> None:
        with self._lock:
            self._run = None

    def take_held(self) -> list[str]:
        """Messages that never reached a run (e.g. the branch ended first)."""
        with self._lock:
            held, self._held = self._held, []
            return held

    @property
    def held(self) -> list[str]:
        with self._lock:
            return list(self._held)


__all__ = ["SteeringQueue"]
