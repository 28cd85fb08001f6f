"""Writes per-step fork state (manifest, branch histories) off the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from branching_core.fork.store import ForkStore

SaveErrorHandler = Callable[[str, str, BaseException], None]
"""Called with (fork_id, name, exception) when a write fails."""


class StateWriter:
    """Writes per-step fork state off the event loop, coalescing bursts.

    Branch steps submit the latest manifest / history payloads; one drain task writes them
    in a worker thread. If a branch produces several snapshots before the previous write
    finished, only the newest is written (each write is still atomic). ``flush()`` waits
    until everything submitted so far is on disk.
    """

    def __init__(self, store: ForkStore, on_error: SaveErrorHandler) -> None:
        self.store = store
        self.on_error = on_error
        self.pending: dict[tuple[str, str], Any] = {}
        self.task: asyncio.Task[None] | None = None

    def submit(self, fork_id: str, name: str, payload: Any) -> None:
        self.pending[(fork_id, name)] = payload
        if self.task is None or self.task.done():
            try:
                self.task = asyncio.get_running_loop().create_task(self._drain())
            except RuntimeError:  # no loop: write now
                self._write_all()

    def _write_all(self) -> None:
        while self.pending:
            (fork_id, name), payload = self.pending.popitem()
            self._write(fork_id, name, payload)

    def _write(self, fork_id: str, name: str, payload: Any) -> None:
        try:
            if name == "manifest":
                self.store.write_manifest(payload)
            else:
                self.store.write_history(fork_id, name, payload)
        except Exception as exc:  # reported (logged and shown on the branch), never lost
            self.on_error(fork_id, name, exc)

    async def _drain(self) -> None:
        while self.pending:
            key = next(iter(self.pending))
            payload = self.pending.pop(key)
            await asyncio.to_thread(self._write, key[0], key[1], payload)

    async def flush(self) -> None:
        while self.task is not None and not self.task.done():
            await asyncio.shield(self.task)
