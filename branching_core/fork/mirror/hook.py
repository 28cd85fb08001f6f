"""``MirrorHook``: keeps one coordinator's current fork mirrored, from ``ForkCreated`` to
``ForkResolved``.

Why a module of its own: the materializer mirrors one fork and knows nothing of
coordinators; this is the glue that follows a coordinator's events (start a mirror per
fork, flush a branch reaching a final state when the mirror is kept, remove it when the
fork is resolved) and relays the user's edits to the branches (:class:`EditRelay`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from branching_core.fork import events as ev
from branching_core.fork.mirror.edit_relay import EditRelay
from branching_core.fork.mirror.materializer import (
    DEFAULT_DEBOUNCE_MS,
    DEFAULT_STEP_MS,
    ForkMaterializer,
    MirrorError,
    remove_mirror,
)
from branching_core.fork.types import FINAL_STATES

log = logging.getLogger(__name__)


@dataclass(eq=False)
class MirrorHook:
    """Keeps one coordinator's current fork mirrored (made by :meth:`ForkMaterializer.attach`).

    With ``keep_artifacts`` a branch reaching a final state is flushed at once, on the
    event loop (before a merge or abort can close it), so the kept mirror is exact.
    """

    coordinator: Any
    keep_artifacts: bool = False
    step_ms: int = DEFAULT_STEP_MS
    debounce_ms: int = DEFAULT_DEBOUNCE_MS
    materializer: ForkMaterializer | None = None
    _remove: Callable[[], None] | None = field(default=None, repr=False)
    edits: EditRelay = field(init=False, repr=False)
    """The user's edits in the mirror: relayed to the branches, remembered per branch."""

    def __post_init__(self) -> None:
        self._remove = self.coordinator.add_listener(self._on_event)
        self.edits = EditRelay(self.coordinator)

    def _on_event(self, event: ev.ForkEvent) -> None:
        if self.edits.loop is None:  # events are published on the coordinator's loop
            self.edits.capture_loop()
        if isinstance(event, ev.ForkCreated):
            self.edits.capture_loop()
            self.edits.reset()
            self.resume()
        elif isinstance(event, ev.ForkResolved):
            mat = self.materializer
            if mat is not None and mat.fork_id == event.fork_id:
                self.materializer = None
                mat.close(cleanup=True)
            elif not self.keep_artifacts:  # resolved before its mirror was (re)built
                remove_mirror(self.coordinator.store.fork_dir(event.fork_id))
        elif (
            isinstance(event, ev.BranchStateChanged)
            and event.state in FINAL_STATES
            and self.keep_artifacts
            and self.materializer is not None
        ):
            with contextlib.suppress(KeyError, OSError):
                self.materializer.flush(event.label)

    def resume(self, *, wait: bool = False) -> ForkMaterializer | None:
        """Start mirroring the coordinator's fork if it is open (after fork() or recover())."""
        coord = self.coordinator
        if coord.fork_id is None or coord.is_resolved:
            return None
        if self.materializer is not None:
            if self.materializer.fork_id == coord.fork_id:
                return self.materializer
            self.materializer.close(cleanup=False)
        mat = ForkMaterializer.for_coordinator(
            coord,
            keep_artifacts=self.keep_artifacts,
            step_ms=self.step_ms,
            debounce_ms=self.debounce_ms,
        )
        mat.on_edits = self.edits.receiver(mat.fork_id)
        self.edits.capture_loop()
        try:
            mat.start(wait=wait)
        except MirrorError as exc:
            log.warning("%s", exc)
            return None
        self.materializer = mat
        return mat

    def detach(self) -> None:
        """Stop listening and watching; a fork still open keeps its mirror for a restart."""
        if self._remove is not None:
            self._remove()
            self._remove = None
        if self.materializer is not None:
            self.materializer.close(cleanup=False)
            self.materializer = None


__all__ = ["MirrorHook"]
