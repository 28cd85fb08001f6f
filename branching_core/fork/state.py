"""``ForkState``: one fork's branches and its resolution, with one way to settle.

Why: the coordinator used to keep the handle, the branches and the resolution as private
fields of a bag shared by five mixins, and each way to end a fork (pick, combine, abort)
wrote them and then ran the end-of-fork steps itself. The copies drifted: a combine
recorded no resolution time and never applied the retention policy. Here the fields have
one owner and every ending calls :meth:`ForkState.settle`, which runs all the steps:

1. the resolution (:class:`Resolution`), its time and the ``post-fork`` checkpoint are
   recorded on the state;
2. pending state writes are flushed and the manifest is written durably;
3. the retention policy (``fork/retention.py``) is applied after the checkpoint copies;
4. the branches' networks, services and port forwards are ended;
5. ``ForkResolved`` is published (the mirror, the TUI and tools listen to it).

Endings that do not end the fork are not settlements: a budget stop or a termination
only stops a branch (it stays mergeable with its partial history); the judge's
auto-merge settles as the pick it makes; a recovered fork is rebuilt from its manifest
(:meth:`ForkState.restore`) and settles later like any other.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from branching_core.errors import InvalidArgumentError, InvalidStateError
from branching_core.fork import events as ev
from branching_core.fork.runtime import BranchRuntime
from branching_core.fork.types import ForkHandle

ResolutionKind = Literal["pick", "combine", "abort"]


@dataclass(frozen=True)
class Resolution:
    """How a fork ended: a picked branch, a combination (whose history continued from
    ``branch_id``) or an abort. ``str()`` is the form the manifest and ``ForkResolved``
    record (``pick:<branch id>``, ``combine:<branch id>``, ``abort``), which older
    versions wrote too; :meth:`from_record` reads it back."""

    kind: ResolutionKind
    branch_id: str | None = None

    def __str__(self) -> str:
        return self.kind if self.branch_id is None else f"{self.kind}:{self.branch_id}"

    @classmethod
    def from_record(cls, text: str | None) -> Resolution | None:
        """The resolution a manifest recorded (None: open, or a word this version does
        not know, kept as it is by :attr:`ForkState.recorded_resolution`)."""
        if not text:
            return None
        kind, _, branch = text.partition(":")
        if kind not in ("pick", "combine", "abort"):
            return None
        return cls(kind, branch or None)


class ForkState:
    """The handle, branches and resolution of this coordinator's current fork.

    ``save`` (flush the writer and write the manifest durably), ``prune`` (apply the
    retention policy later), ``release_networks`` and ``publish`` are the end-of-fork steps
    the owner wires in once; :meth:`settle` is the only code that runs them.
    """

    def __init__(
        self,
        *,
        save: Callable[[], Awaitable[None]],
        prune: Callable[[], None],
        release_networks: Callable[[], Awaitable[None]],
        publish: Callable[[ev.ForkEvent], None],
    ) -> None:
        self.handle: ForkHandle | None = None
        self.branches: dict[str, BranchRuntime] = {}
        self.resolved = False
        self.settling = False
        """Inside :meth:`settle` until its event: the fork refuses new work (``resolved``)
        but is not over for those who wait for its end (``is_resolved``)."""
        self.resolution: Resolution | None = None
        self.recorded_resolution: str | None = None
        """The manifest's resolution text when this version cannot read it (kept as is)."""
        self.resolved_at: float | None = None
        self.post_checkpoint: str | None = None
        self.lock = asyncio.Lock()
        """Held while the fork is created or settled: one at a time."""
        self._save = save
        self._prune = prune
        self._release_networks = release_networks
        self._publish = publish

    # -- reading -------------------------------------------------------------------------
    @property
    def fork_id(self) -> str | None:
        return self.handle.fork_id if self.handle else None

    @property
    def is_resolved(self) -> bool:
        """True when no live branch state is owned: never forked, settled (every end-of-fork
        step done: a front door that waits for this, then exits, cuts none of them short)."""
        return self.handle is None or (self.resolved and not self.settling)

    @property
    def resolution_text(self) -> str | None:
        """What the manifest records (``pick:<id>``, ``combine:<id>``, ``abort``)."""
        if self.resolution is not None:
            return str(self.resolution)
        return self.recorded_resolution

    def require_handle(self) -> ForkHandle:
        if self.handle is None:
            raise InvalidStateError("no fork yet: call fork() (or the fork_run tool) first")
        return self.handle

    def require_open(self) -> ForkHandle:
        """The handle of a fork not yet settled (``RuntimeError`` otherwise)."""
        handle = self.require_handle()
        if self.resolved:
            raise InvalidStateError(
                f"fork {handle.fork_id} is already resolved ({self.resolution_text})"
            )
        return handle

    def get_branch(self, key: str) -> BranchRuntime:
        """A branch by id or by label."""
        rt = self.branches.get(key)
        if rt is not None:
            return rt
        matches = [r for r in self.branches.values() if r.label == key]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            known = ", ".join(f"{r.label} ({r.branch_id})" for r in self.branches.values())
            raise InvalidArgumentError(f"no branch {key!r}; branches: {known or 'none'}")
        raise InvalidArgumentError(f"label {key!r} is ambiguous; use a branch id")

    # -- opening ------------------------------------------------------------------------------
    def open(self, handle: ForkHandle, runtimes: Iterable[BranchRuntime]) -> None:
        """A new fork: its handle and branches, nothing settled."""
        self.branches = {rt.branch_id: rt for rt in runtimes}
        self.handle = handle
        self.resolved = False
        self.resolution = None
        self.recorded_resolution = None
        self.resolved_at = None
        self.post_checkpoint = None

    def restore(
        self,
        handle: ForkHandle,
        runtimes: Iterable[BranchRuntime],
        *,
        resolved: bool,
        resolution: str | None,
        resolved_at: float | None,
        post_checkpoint: str | None,
    ) -> None:
        """A fork rebuilt from its manifest (``persistence.recover``)."""
        self.open(handle, runtimes)
        self.resolved = resolved
        self.resolution = Resolution.from_record(resolution)
        self.recorded_resolution = resolution if self.resolution is None else None
        self.resolved_at = resolved_at
        self.post_checkpoint = post_checkpoint

    # -- settling ------------------------------------------------------------------------------
    async def settle(
        self,
        resolution: Resolution,
        *,
        discarded: Iterable[str] = (),
        post_checkpoint: str | None = None,
    ) -> None:
        """End the fork as ``resolution`` says and run every end-of-fork step (module doc).

        Called with :attr:`lock` held, after the branches were landed or discarded."""
        handle = self.require_handle()
        self.settling = True
        try:
            self.resolved = True
            self.resolution = resolution
            self.recorded_resolution = None
            self.resolved_at = time.time()
            self.post_checkpoint = post_checkpoint
            await self._save()
            self._prune()
            await self._release_networks()
        finally:
            self.settling = False
        self._publish(
            ev.ForkResolved(
                fork_id=handle.fork_id,
                action=str(resolution),
                winner_branch_id=resolution.branch_id,
                discarded=tuple(discarded),
            )
        )


__all__ = ["ForkState", "Resolution", "ResolutionKind"]
