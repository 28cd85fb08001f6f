"""Sweep what a process killed inside ``fork()`` left behind.

``fork()`` writes an intent manifest (``creating: true``, with its pid) before it creates
any durable workspace branch, and the full manifest once they exist. A process killed in
between leaves durable branches no fork will ever merge or abort. At the next
:meth:`ForkCoordinator.recover` this sweep aborts them:

* every durable workspace branch named like a fork branch (``fork-<fork_id>-...``) whose
  owning process is gone and that no open fork still needs (a killed ``fork()``'s, or one
  a merge or abort killed half-way left behind);
* the fork directory of an intent manifest whose process is gone (nothing ran in it).

A branch or intent of a live process (another coordinator mid-``fork()``) is never touched.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from branching_core.fork.store import ForkStore

log = logging.getLogger(__name__)

FORK_BRANCH_PREFIX = "fork-"


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _referenced(store: ForkStore) -> set[str]:
    """Workspace branches an unresolved fork still needs: its live (unresolved) branches
    and the outer branch it was taken from."""
    ids: set[str] = set()
    for manifest in store.list_forks(include_creating=True):
        if manifest.get("resolved"):
            continue
        for branch in manifest.get("branches", ()):
            if branch.get("workspace_branch_id") and branch.get("resolution") is None:
                ids.add(str(branch["workspace_branch_id"]))
        if manifest.get("parent_workspace_branch_id"):
            ids.add(str(manifest["parent_workspace_branch_id"]))
    return ids


def sweep_interrupted_forks(workspace: Any, store: ForkStore) -> list[str]:
    """Abort the durable branches and drop the intents a killed ``fork()`` left; returns
    the workspace branch ids aborted."""
    for manifest in store.list_forks(include_creating=True):
        if manifest.get("creating") and not pid_alive(manifest.get("pid")):
            fork_id = str(manifest["fork_id"])
            log.warning("dropping fork %s: its process was killed while forking", fork_id)
            store.remove(fork_id)
    referenced = _referenced(store)
    orphans = [
        info
        for info in workspace.list_branches()
        if info.durable
        and not info.owner_alive
        and not info.open_here
        and info.name.startswith(FORK_BRANCH_PREFIX)
        and info.id not in referenced
    ]
    aborted = []
    for info in sorted(orphans, key=lambda i: -i.branch_path.count("/")):  # children first
        try:
            branch = workspace.open_branch(info.id)
            if branch.is_open:
                branch.abort()
            aborted.append(info.id)
        except Exception as exc:  # one stuck branch must not stop the others
            log.warning("cannot sweep leaked fork branch %s (%s): %s", info.id, info.name, exc)
    if aborted:
        log.warning("aborted %d workspace branch(es) a killed fork() left", len(aborted))
    return aborted


__all__ = ["FORK_BRANCH_PREFIX", "pid_alive", "sweep_interrupted_forks"]
