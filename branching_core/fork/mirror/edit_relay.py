"""From a batch of the user's mirror edits (watcher thread) to the coordinator (event loop).

The watcher applies a user's edits to the branch's view on its own thread; the
coordinator's events and a branch's steering queue belong to the event loop. The relay
hands each :class:`~branching_core.fork.mirror.edits.EditBatch` over with
``call_soon_threadsafe`` and there:

* puts the batch's note on the branch's steering queue, so its model reads it at its very
  next request (once per batch; held until the next turn when the branch is not running);
* publishes :class:`BranchUserEdited`, :class:`BranchEditConflict` and
  :class:`BranchEditRefused` for any front end;
* remembers which paths the user edited and which conflicted, per branch
  (:meth:`EditRelay.edited_paths`, :meth:`EditRelay.conflicts`), for "edited by you".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from branching_core.fork import events as ev
from branching_core.fork.mirror.edits import EditBatch, EditConflict

log = logging.getLogger(__name__)


class EditRelay:
    """One coordinator's receiver of the user's mirror edits."""

    def __init__(self, coordinator: Any) -> None:
        self.coordinator = coordinator
        self.loop: asyncio.AbstractEventLoop | None = None
        self._waiting: list[tuple[str, EditBatch]] = []
        """Batches that arrived before the loop was known (a fork recovered outside it)."""
        self._waiting_lock = threading.Lock()
        self._edited: dict[str, dict[str, None]] = {}  # label -> paths (ordered set)
        self._conflicts: dict[str, list[EditConflict]] = {}
        self.capture_loop()

    def capture_loop(self) -> None:
        """Remember the running event loop (the coordinator's), when there is one, and
        deliver what arrived before it was known."""
        with contextlib.suppress(RuntimeError):
            self.loop = asyncio.get_running_loop()
        if self.loop is not None and self._waiting:
            with self._waiting_lock:
                waiting, self._waiting = self._waiting, []
            for fork_id, batch in waiting:
                self.loop.call_soon(self.deliver, fork_id, batch)

    def reset(self) -> None:
        """A new fork: nothing is edited yet."""
        self._edited.clear()
        self._conflicts.clear()

    # -- queries ---------------------------------------------------------------------------
    def edited_paths(self) -> dict[str, list[str]]:
        """label -> the paths the user edited in that branch's mirror directory."""
        return {label: list(paths) for label, paths in self._edited.items() if paths}

    def conflicts(self) -> dict[str, list[EditConflict]]:
        """label -> the user's edits that met a branch change (kept aside, not applied)."""
        return {label: list(found) for label, found in self._conflicts.items() if found}

    # -- watcher thread -> loop ------------------------------------------------------------
    def receiver(self, fork_id: str) -> Callable[[EditBatch], None]:
        """The ``ForkMaterializer.on_edits`` callback for fork ``fork_id``."""

        def receive(batch: EditBatch) -> None:
            loop = self.loop
            if loop is None:  # delivered once the coordinator's loop shows up
                with self._waiting_lock:
                    self._waiting.append((fork_id, batch))
                return
            if loop.is_closed():
                log.warning("user edits in fork %s not relayed: the event loop is closed", fork_id)
                return
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self.deliver, fork_id, batch)

        return receive

    def deliver(self, fork_id: str, batch: EditBatch) -> None:
        """On the event loop: tell the branch's model, publish the events, remember."""
        coord = self.coordinator
        if coord.fork_id != fork_id or coord.is_resolved:
            return
        try:
            rt = coord.get_branch(batch.label)
        except ValueError:
            return
        note = batch.note()
        if note:
            rt.queue.put(note)
        publish: Callable[[ev.ForkEvent], None] = coord.publish
        ids = {"fork_id": fork_id, "branch_id": rt.branch_id, "label": rt.label}
        if batch.edits:
            edited = self._edited.setdefault(rt.label, {})
            for edit in batch.edits:
                edited[edit.path] = None
            publish(
                ev.BranchUserEdited(
                    **ids,
                    paths=tuple(e.path for e in batch.edits),
                    summaries=tuple(e.summary() for e in batch.edits),
                    note=note,
                )
            )
        for conflict in batch.conflicts:
            self._conflicts.setdefault(rt.label, []).append(conflict)
            self._edited.setdefault(rt.label, {})[conflict.path] = None
            kept = str(conflict.kept_as) if conflict.kept_as is not None else None
            publish(ev.BranchEditConflict(**ids, path=conflict.path, kept_as=kept))
        for refused in batch.refused:
            publish(ev.BranchEditRefused(**ids, path=refused.path, reason=refused.reason))


__all__ = ["EditRelay"]
