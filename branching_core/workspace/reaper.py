"""Throw a branch's store directory away off the caller's path.

Why: disposing of a branch (after its commit, or an abort) removed its whole store
directory before returning: on the copy backend a full copy of the tree (an ``rm -rf``
of 1,000 files: 100-250 ms on a loaded 2-core machine), the bulk of a fork's merge.
Nothing the caller does next needs those bytes gone, only the branch gone. So
:func:`discard_dir` renames the directory into the store's ``trash/`` (one rename on the
same filesystem: the branch is gone from ``branch_ids()`` and ``list_branches()`` at
once) and a single background thread removes it.

Nothing is left behind: :func:`drain` waits for every removal queued so far and runs at
interpreter exit (``atexit``); a process killed before that leaves ``trash/<sid>-<n>``,
whose name carries the dead session's id, so ``Store.sweep_trash`` removes it at the
next open of the workspace (as it does for any trash).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections import deque
from pathlib import Path

from branching_core.workspace.faults import crash_point
from branching_core.workspace.fsutil import remove_shallow_tree, rmtree
from branching_core.workspace.treescan import remove_trees

log = logging.getLogger(__name__)


class _Reaper:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        # (paths, in_process): in_process removes each path with one unlink per entry in
        # this (niced) thread; else one ``rm -rf`` child for all of them
        self._queue: deque[tuple[list[Path], bool]] = deque()
        self._busy = 0
        self._thread: threading.Thread | None = None

    def put(self, paths: list[Path], *, in_process: bool = False) -> None:
        """Queue one removal job for ``paths`` (siblings discarded together share one)."""
        with self._cond:
            self._queue.append((paths, in_process))
            self._busy += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="forkdeck-reaper", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        # lowest CPU priority for this thread and the rm children it starts (Linux nice
        # is per thread): the removals yield to the merge or fork that follows
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                paths, in_process = self._queue.popleft()
            try:
                if in_process:  # a few hundred entries: cheaper than an rm child
                    for path in paths:
                        remove_shallow_tree(path)
                else:
                    # out of process (rm -rf): this thread then holds the GIL for nothing
                    remove_trees(paths)
            except OSError as exc:
                log.warning("cannot remove %s (swept at the next open): %s", paths, exc)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0, timeout)

    def forget(self) -> None:
        """In a forked child: the thread is not there, the parent removes its own trash."""
        self._cond = threading.Condition()
        self._queue.clear()
        self._busy = 0
        self._thread = None


_REAPER = _Reaper()
atexit.register(_REAPER.drain)
os.register_at_fork(after_in_child=_REAPER.forget)


def discard_dir(path: Path, trash: Path) -> None:
    """Make ``path`` disappear now and its bytes later: renamed to ``trash`` (a new name
    in the store's ``trash/`` directory, same filesystem), then removed in the background.
    Removed here and now when it cannot be renamed."""
    discard_dirs([(path, trash)])


def discard_dirs(moves: list[tuple[Path, Path]]) -> None:
    """:func:`discard_dir` for several directories (siblings aborted together): every
    ``trash`` must be in one directory; one background job (one ``rm -rf``) removes them."""
    if not moves:
        return
    with contextlib.suppress(OSError):
        os.mkdir(moves[0][1].parent)
    queued: list[Path] = []
    for n, (path, trash) in enumerate(moves):
        if n:
            crash_point(f"discard:moved:{n}")
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            if os.path.lexists(path):
                rmtree(path)
            continue
        except OSError:
            rmtree(path)
            continue
        queued.append(trash)
    if queued:
        _REAPER.put(queued)


def reap(path: Path, *, in_process: bool) -> None:
    """Remove ``path`` (already renamed to a name of the store's ``trash/`` that carries
    this session's id) in the background: a finished commit's scratch, its displaced old
    copies. ``in_process``: a shallow directory of at most a few thousand entries, removed
    by name in the reaper's thread; else by an ``rm -rf`` child."""
    _REAPER.put([path], in_process=in_process)


def drain(timeout: float | None = None) -> bool:
    """Wait until every directory discarded so far is removed; False on timeout."""
    return _REAPER.drain(timeout)


__all__ = ["discard_dir", "drain", "reap"]
