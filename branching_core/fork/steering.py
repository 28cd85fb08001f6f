"""Per-branch steering queues.

Each branch owns one :class:`SteeringQueue`. A message put on it reaches that branch's very
next model request and no other branch's: while the branch's ``AgentRun`` is live the
message is handed to pydantic-ai's own pending-message queue (``AgentRun.enqueue`` with
priority ``'asap'``), which its always-on drain capability prepends to the next
``ModelRequest`` (or, if the run was about to end, turns into one more request). Messages
put before the run exists are held and handed over the moment it starts.

A message handed over after the run's last chance to send it (the run was already
finishing) would otherwise vanish: :meth:`SteeringQueue.detach` checks the run's messages
for every message handed to it, and holds again the ones no request carried, so the
coordinator can deliver them (a new turn) or report them undelivered.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelRequest, UserPromptPart

log = logging.getLogger(__name__)


def _user_texts(messages: Sequence[Any]) -> Counter[str]:
    texts: Counter[str] = Counter()
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                texts[part.content] += 1
    return texts


@dataclass
class SteeringQueue:
    """One branch's message queue (``BranchIsolation.message_queue='isolated'``)."""

    _held: list[str] = field(default_factory=list)
    _run: Any = None
    _sent: list[str] = field(default_factory=list)
    """Handed to the current run, not yet checked against its messages."""
    _base: int = 0
    delivered: list[str] = field(default_factory=list)
    """Every message a model request carried, in order (what the branch has been told)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def attached(self) -> bool:
        return self._run is not None and getattr(self._run, "result", None) is None

    def put(self, message: str) -> bool:
        """Queue ``message``; True when it went straight to the live run, False when it is
        held for the branch's next request (see the module docstring)."""
        with self._lock:
            run = self._run
            if run is not None and getattr(run, "result", None) is None:
                try:
                    run.enqueue(message, priority="asap")
                except Exception as exc:  # the run ended between the check and the call
                    log.info("steer held for the next request: %s", exc)
                    self._held.append(message)
                    return False
                self._sent.append(message)
                self.delivered.append(message)
                return True
            self._held.append(message)
            return False

    def attach(self, run: Any) -> None:
        """Bind to a live ``AgentRun`` and hand it every held message."""
        with self._lock:
            self._run = run
            try:
                self._base = len(run.all_messages())
            except Exception:
                self._base = 0
            held, self._held = self._held, []
            for message in held:
                run.enqueue(message, priority="asap")
                self._sent.append(message)
                self.delivered.append(message)

    def detach(self, messages: Sequence[Any] = ()) -> list[str]:
        """Unbind from the run whose final ``messages`` are given; returns the messages held
        now: those handed to the run that none of its requests carried, and any put since."""
        with self._lock:
            self._run = None
            carried = _user_texts(messages[self._base :])
            missed = []
            for message in self._sent:
                if carried[message] > 0:
                    carried[message] -= 1
                else:
                    missed.append(message)
            for message in missed:
                self.delivered.remove(message)
            self._sent = []
            self._held = missed + self._held
            return list(self._held)

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
