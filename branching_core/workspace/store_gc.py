"""Garbage-collect branch stores whose workspace no longer exists.

Stores live outside the workspace (``~/.cache/forkdeck/stores/<key>``), so deleting a
project leaves its store behind for good; on a busy machine hundreds pile up. Every
store records its workspace's path in ``<store>/workspace``. A store is removed only
when that directory is gone (from the store's own filesystem: a workspace on a drive
that is only unmounted is not gone) *and* no process holds one of the store's session locks
*and* its commit lock can be taken without waiting; the workspace is checked again
under that lock (opening a workspace checks the directory first, then takes the same
lock to recover), so a store in use is never touched. The sweep runs when a workspace
opens, at most once an hour per stores directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from pathlib import Path

from branching_core.workspace.fsutil import nearest_existing, rmtree
from branching_core.workspace.session_lock import held_by_live_owner

log = logging.getLogger(__name__)
SWEEP_INTERVAL_S = 3600.0
STAMP = ".sweep-stamp"


def _workspace_of(store: Path) -> Path | None:
    try:
        text = (store / "workspace").read_text()
    except (OSError, UnicodeDecodeError):
        return None  # not a store we made (or unreadable): never guess
    return Path(text[:-1] if text.endswith("\n") else text)


def _held(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return held_by_live_owner(fd)
    except OSError:
        return True  # cannot tell: treat as in use
    finally:
        os.close(fd)


def _in_use(store: Path) -> bool:
    sessions = store / "sessions"
    with contextlib.suppress(OSError):
        return any(_held(lock) for lock in sessions.glob("*.lock"))
    return True


def sweep_orphan_stores(
    base: Path, *, keep: Path | None = None, interval_s: float = SWEEP_INTERVAL_S
) -> list[Path]:
    """Remove the stores in ``base`` whose workspace is gone and that nobody uses.

    ``keep`` is never touched (the caller's own store). Returns what was removed. Does
    nothing when ``base`` was swept less than ``interval_s`` ago.
    """
    stamp = base / STAMP
    try:
        if time.time() - stamp.stat().st_mtime < interval_s:
            return []
    except FileNotFoundError:
        pass
    try:
        stamp.touch()
        entries = list(base.iterdir())
    except OSError:
        return []
    removed: list[Path] = []
    for store in entries:
        if (
            store.name.startswith(".gc-")
            and store.is_dir()
            and not Path(f"/proc/{_pid_of(store)}").exists()
        ):
            rmtree(store)  # a sweep that died half way
            continue
        if store == keep or store.name.startswith(".") or not store.is_dir():
            continue
        workspace = _workspace_of(store)
        if workspace is None or workspace.is_dir() or _in_use(store):
            continue
        if not _gone_for_sure(workspace, store):
            continue
        if _remove_if_still_orphaned(store, workspace):
            removed.append(store)
    if removed:
        log.info("removed %d branch store(s) of deleted workspaces in %s", len(removed), base)
    return removed


def _gone_for_sure(workspace: Path, store: Path) -> bool:
    """A missing workspace on another filesystem may only be unmounted (a removable
    drive): only a directory missing from the store's own filesystem counts as gone."""
    probe = nearest_existing(workspace)
    if probe is None:
        return False
    try:
        return os.stat(probe).st_dev == os.stat(store).st_dev
    except OSError:
        return False


def _pid_of(doomed: Path) -> str:
    pid = doomed.name.rsplit("-", 1)[-1]
    return pid if pid.isdigit() else "0"


def _remove_if_still_orphaned(store: Path, workspace: Path) -> bool:
    try:
        fd = os.open(store / "commit.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # someone is committing or recovering: in use
        if workspace.is_dir() or _in_use(store):
            return False
        doomed = store.with_name(f".gc-{store.name}-{os.getpid()}")
        try:
            os.rename(store, doomed)  # gone from view at once; removal can take a while
        except OSError:
            return False
    finally:
        os.close(fd)
    rmtree(doomed)
    return True


__all__ = ["SWEEP_INTERVAL_S", "sweep_orphan_stores"]
