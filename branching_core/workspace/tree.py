"""``BranchTree``: what every node of one workspace's tree of branches shares.

A ``Workspace`` and each of its ``Branch`` objects hold the same ``BranchTree``: the
branch store (upper/work dirs, metadata, generations, journal), the backend chosen for
the workspace, the registry of branches open in this process, and the commit lock. It
exists so that ``Branch`` needs nothing private from ``Workspace`` (no friend classes):
both talk to this one collaborator through its public methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from branching_core.workspace.backends.base import Backend
from branching_core.workspace.store import Store

if TYPE_CHECKING:
    from branching_core.workspace.branch import Branch


class BranchTree:
    """The store, backend, open-branch registry and commit lock of one workspace."""

    def __init__(self, store: Store, backend: Backend) -> None:
        self.store = store
        self.backend = backend
        self._open: dict[str, Branch] = {}
        self._open_lock = threading.RLock()
        # Observers of commits (the headless CLI's git landing, issue 25): each
        # ``before_commit`` hook sees the branch while its view is still there (under the
        # commit lock, before anything is published); each ``after_commit`` hook gets the
        # branch and the parent paths it changed, once published. A hook's exception is
        # logged, never a failed commit.
        self.before_commit: list[Callable[[Branch], None]] = []
        self.after_commit: list[Callable[[Branch, list[str]], None]] = []

    # -- the commit lock -------------------------------------------------------------------
    def commit_lock(self) -> AbstractContextManager[None]:
        """Serialises every commit, replay and store sweep of this workspace, across
        processes (a file lock in the store)."""
        return self.store.commit_lock()

    # -- branches open in this process -----------------------------------------------------
    def register(self, branch: Branch) -> None:
        with self._open_lock:
            self._open[branch.id] = branch

    def unregister(self, branch: Branch) -> None:
        with self._open_lock:
            self._open.pop(branch.id, None)

    def get(self, branch_id: str) -> Branch | None:
        """The branch with this id open in this process, or None."""
        with self._open_lock:
            return self._open.get(branch_id)

    def open_ids(self) -> set[str]:
        with self._open_lock:
            return set(self._open)

    def open_branches(self) -> list[Branch]:
        """Every branch open in this process, parents before children."""
        with self._open_lock:
            return sorted(self._open.values(), key=lambda b: b.branch_path.count("/"))


__all__ = ["BranchTree"]
