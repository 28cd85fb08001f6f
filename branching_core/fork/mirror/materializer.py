"""``ForkMaterializer``: a live on-disk mirror of a fork's branches, for IDE diff tools.

::

    .pydantic-deep/forks/<fork_id>/
        manifest.json, history/, checkpoints/   the fork store's (never touched here)
        parent/                                 fork-time version of every touched path
        branches/<label>/                       each branch's changed files, as they are now
        mirror.json, mirror.lock                who mirrors this fork, and which label is where

Why it watches the branch store instead of hooking a write tool: a branch's files change
through its tools, through shell commands in the sandbox (``sed -i``, formatters, test
runs) and through anything those start. All of them end up in one place on the host
filesystem: the overlay backend's upper directory, or the branch directory itself for the
copy and reflink backends. One ``watchfiles`` watcher per fork (a thread, one inotify
instance for all of the fork's branches) reports those writes; each batch is re-diffed
path by path (see :mod:`branching_core.fork.mirror.sync`), so the mirror follows every
writer within the watcher's step (tens of milliseconds) plus the copy time.

A second watcher thread per fork watches ``branches/`` itself: what the user saves there
(an IDE open on a branch's directory) is applied to that branch's view, and conflicts
are kept aside (:mod:`~branching_core.fork.mirror.edit_intake`, which also saves the
stamps a restarted process needs; the rules per path are in ``edits``).

The workspace hides ``.pydantic-deep`` from every branch (overlay whiteout, copy ignore
rule), so the mirror never shows up in a branch's view nor in what a merge commits.

Lifetime: :meth:`ForkMaterializer.attach` hooks a :class:`~branching_core.fork.ForkCoordinator`
(``ForkCreated`` starts a mirror, ``ForkResolved`` removes ``parent/``, ``branches/`` and
``mirror.json`` unless ``keep_artifacts``). A process killed mid-fork leaves its mirror
behind; :func:`recover_mirrors` (called by ``ForkCoordinator.recover(...,
materialize=True)``) rebuilds the mirrors of forks still open and cleans the others.
The coordinator glue is :mod:`~branching_core.fork.mirror.hook`.

Why this module is over ~500 lines: what is left here is one fork's mirror lifecycle
(layout, claim and lock, the two watcher threads, flush/rebuild, cleanup), which changes
together; the user-edit direction and the coordinator hook were split out.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core.atomicio import atomic_write
from branching_core.errors import BranchingError, NotFoundError, error_name
from branching_core.fork.mirror.edit_intake import STAMPS_FILE, EditIntake, branch_held
from branching_core.fork.mirror.edits import EditBatch
from branching_core.fork.mirror.sync import MirroredBranch, MirrorTree, relevant
from branching_core.fork.store import ForkStore

if TYPE_CHECKING:
    from branching_core.fork.coordinator import ForkCoordinator
    from branching_core.fork.mirror.hook import MirrorHook
    from branching_core.workspace.branch import Branch

log = logging.getLogger(__name__)

MIRROR_FILE = "mirror.json"
LOCK_FILE = "mirror.lock"
MIRROR_VERSION = 1
DEFAULT_STEP_MS = 20
"""watchfiles waits this long for more events before handing a batch over."""
DEFAULT_DEBOUNCE_MS = 100
"""...and never longer than this under a steady stream of writes."""


_WATCHING: weakref.WeakSet[ForkMaterializer] = weakref.WeakSet()


@atexit.register
def _stop_watchers() -> None:
    """Stop watcher threads before the interpreter goes away (mirrors stay for a restart)."""
    for mat in list(_WATCHING):
        mat.stop()


class MirrorError(BranchingError):
    """The mirror cannot be started (e.g. another live process mirrors this fork)."""


def mirror_dirname(label: str, taken: Iterable[str] = ()) -> str:
    """A safe directory name for ``label`` (unique among ``taken``)."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip(".-")[:60] or "branch"
    used = set(taken)
    name, n = base, 2
    while name in used:
        name, n = f"{base}-{n}", n + 1
    return name


def own_layer(branch: Branch) -> Path:
    """Where ``branch``'s own writes physically land: the overlay upper dir, else its view
    (:attr:`Branch.write_layer`)."""
    return branch.write_layer


def _try_lock(path: Path) -> int | None:
    """An exclusive flock on ``path`` (held until closed), or None when someone holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@dataclass
class _Watch:
    """One fork's watcher threads and how they are doing."""

    stop: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    edit_thread: threading.Thread | None = None
    """Watches ``branches/`` for the user's edits. A watcher of its own: the mirror's own
    writes land there, and in the branch watcher's stream their events would hold its
    batches open (watchfiles hands a batch over only after a quiet step)."""
    batches: int = 0
    error: str | None = None


class ForkMaterializer:
    """One fork's mirror (see the module docstring).

    ``root`` is the workspace root (where ``.pydantic-deep`` lives); ``parent_root`` the
    directory the fork was taken from (the workspace, or the outer branch's view for a
    nested fork). Add branches with :meth:`add_branch`, then :meth:`start` the watcher.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        fork_id: str,
        *,
        parent_root: str | os.PathLike[str] | None = None,
        keep_artifacts: bool = False,
        step_ms: int = DEFAULT_STEP_MS,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
    ) -> None:
        self.root = Path(root)
        self.fork_id = fork_id
        self.fork_dir = ForkStore(self.root).fork_dir(fork_id)
        self.parent_root = Path(parent_root) if parent_root is not None else self.root
        self.keep_artifacts = keep_artifacts
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.tree = MirrorTree(self.fork_dir, self.parent_root)
        self._branches: dict[str, MirroredBranch] = {}
        self._lock_fd: int | None = None
        self._watch: _Watch | None = None
        self.closed = False
        self.edits = EditIntake(self.tree, self.fork_dir, fork_id, self._branches)
        """The user's side: their edits in ``branches/`` applied, stamps saved."""

    @property
    def on_edits(self) -> Callable[[EditBatch], None] | None:
        """Called (on the watcher thread) with each batch of the user's edits in a
        branch's mirror directory, and the conflicts and refusals they led to."""
        return self.edits.on_edits

    @on_edits.setter
    def on_edits(self, callback: Callable[[EditBatch], None] | None) -> None:
        self.edits.on_edits = callback

    def save_stamps(self) -> None:
        """Save what the mirror wrote where (when it changed), for a restart after a kill."""
        self.edits.save_stamps()

    def keep_unapplied(self) -> list[Path]:
        """Copy every user edit not applied yet to ``conflicts/`` (see ``EditIntake``)."""
        return self.edits.keep_unapplied()

    # -- layout (seed names) ----------------------------------------------------------------
    @property
    def parent_dir(self) -> Path:
        return self.tree.parent_dir

    @property
    def branches_dir(self) -> Path:
        return self.tree.branches_dir

    def branch_dir(self, label: str) -> Path:
        """``branches/<dir>`` of the branch labelled ``label``."""
        return self.tree.branch_root(self._by_label(label).dirname)

    def parent_path(self, path: str) -> Path:
        """Where the parent's fork-time version of ``path`` is mirrored."""
        return self.parent_dir / path

    def branch_path(self, label: str, path: str) -> Path:
        """Where branch ``label``'s current version of ``path`` is mirrored."""
        return self.branch_dir(label) / path

    @property
    def labels(self) -> list[str]:
        return [b.label for b in self._branches.values()]

    def touched_paths(self, label: str | None = None) -> list[str]:
        """Files some branch (or branch ``label``) changed or deleted, as mirrored now."""
        return self.tree.touched(self._by_label(label).dirname if label is not None else None)

    def _by_label(self, label: str) -> MirroredBranch:
        for b in self._branches.values():
            if b.label == label:
                return b
        raise NotFoundError(f"no mirrored branch {label!r} in fork {self.fork_id}")

    # -- setup --------------------------------------------------------------------------------
    def add_branch(self, label: str, branch: Any) -> MirroredBranch:
        """Mirror ``branch`` (a workspace ``Branch``) as ``branches/<label>/``."""
        if self._watch is not None:
            raise MirrorError("add every branch before start(): the watcher is running")
        entry = MirroredBranch(
            label=label,
            dirname=mirror_dirname(label, self._branches),
            view=Path(branch.path),
            layer=own_layer(branch),
            branch=branch,
        )
        self._branches[entry.dirname] = entry
        self.edits.load_saved_stamps(entry)
        self.tree.register(entry.dirname)
        return entry

    def _write_info(self, state: str) -> None:
        info = {
            "version": MIRROR_VERSION,
            "fork_id": self.fork_id,
            "pid": os.getpid(),
            "state": state,
            "keep_artifacts": self.keep_artifacts,
            "parent_root": str(self.parent_root),
            "branches": [
                {
                    "label": b.label,
                    "dir": b.dirname,
                    "workspace_branch_id": getattr(b.branch, "id", None),
                }
                for b in self._branches.values()
            ],
            "updated_at": time.time(),
        }
        payload = json.dumps(info, indent=1, sort_keys=True).encode()
        atomic_write(self.fork_dir / MIRROR_FILE, payload)

    def claim(self) -> None:
        """Take ``mirror.lock`` (a restarted process can tell a live mirror from an orphan)."""
        if self._lock_fd is None:
            fd = _try_lock(self.fork_dir / LOCK_FILE)
            if fd is None:
                raise MirrorError(f"fork {self.fork_id} is already mirrored by a live process")
            self._lock_fd = fd
        self._write_info("live")

    def _release_lock(self, *, unlink: bool) -> None:
        if self._lock_fd is None:
            return
        if unlink:
            with contextlib.suppress(FileNotFoundError):
                (self.fork_dir / LOCK_FILE).unlink()
        os.close(self._lock_fd)
        self._lock_fd = None

    # -- syncing ------------------------------------------------------------------------------
    def flush(self, label: str | None = None) -> int:
        """Full reconcile now, in the caller's thread (all branches, or ``label``'s).

        A conflict the reconcile meets (the user and the branch both changed a path) is
        reported at once, not with the watcher's next batch: the diff tool that asked for
        this flush is about to show that path."""
        targets = [self._by_label(label)] if label is not None else list(self._branches.values())
        done = 0
        for b in targets:
            with branch_held(b.branch) as is_open:
                if is_open:
                    done += self.tree.reconcile(b)
        self.edits.report({})
        self.save_stamps()
        return done

    def rebuild(self) -> int:
        """Full reconcile that also drops what an earlier mirror of this fork left behind:
        directories of branches that are gone, and ``parent/`` copies nobody touches."""
        from branching_core.workspace.fsutil import rmtree

        if self.branches_dir.is_dir():
            for entry in self.branches_dir.iterdir():
                if entry.name not in self._branches:
                    rmtree(entry)
        done = self.flush()
        self.tree.prune_parent()
        return done

    def _sync_batch(self, changes: set[tuple[Any, str]]) -> None:
        by_branch: dict[str, set[str]] = {}
        for _change, raw in changes:
            hit = self._locate(raw)
            if hit is not None:
                by_branch.setdefault(hit[0].dirname, set()).add(hit[1])
        for dirname, rels in by_branch.items():
            b = self._branches[dirname]
            with branch_held(b.branch) as is_open:
                if is_open:
                    self.tree.sync(b, rels)
        self.edits.report({})  # conflicts a sync met (a user's edit not yet applied)
        self.save_stamps()

    def _locate(self, raw: str) -> tuple[MirroredBranch, str] | None:
        for b in self._branches.values():
            layer = str(b.layer)
            if raw.startswith(layer + os.sep):
                rel = raw[len(layer) + 1 :]
                return (b, rel) if relevant(rel) else None
        return None

    # -- watcher ------------------------------------------------------------------------------
    def start(self, *, wait: bool = True, timeout: float = 10.0) -> None:
        """Claim the mirror, start the watcher and reconcile once; ``wait`` for that."""
        if self.closed:
            raise MirrorError(f"the mirror of fork {self.fork_id} is already closed")
        if self._watch is not None:
            return
        self.claim()
        watch = _Watch()
        watch.thread = threading.Thread(
            target=self._run, args=(watch,), name=f"fork-mirror-{self.fork_id}", daemon=True
        )
        self._watch = watch
        _WATCHING.add(self)
        watch.thread.start()
        if wait:
            self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 10.0) -> bool:
        """True once the watcher is watching and the first full reconcile is done."""
        return self._watch is not None and self._watch.ready.wait(timeout)

    @property
    def watching(self) -> bool:
        watch = self._watch
        return watch is not None and watch.thread is not None and watch.thread.is_alive()

    def _run(self, watch: _Watch) -> None:
        import watchfiles

        layers = [str(b.layer) for b in self._branches.values() if b.layer.is_dir()]
        for force_polling in (False, True):
            try:
                self._watch_loop(watchfiles, layers, watch, force_polling=force_polling)
                return
            except Exception as exc:  # inotify limits, a vanished layer...
                watch.error = f"{error_name(exc)}: {exc}"
                if watch.stop.is_set():
                    return
                log.warning("fork %s mirror watcher failed (%s)", self.fork_id, watch.error)
        watch.ready.set()

    def _batches(
        self, watchfiles: Any, paths: list[str], watch: _Watch, *, force_polling: bool
    ) -> Iterator[set[tuple[Any, str]]]:
        """One watcher's batches (both watchers use the same settings): every event (no
        filter), a batch at least every 100 ms even when idle (the first one says the
        watch is live), until ``watch.stop``."""
        batches: Iterator[set[tuple[Any, str]]] = watchfiles.watch(
            *paths,
            watch_filter=None,
            debounce=self.debounce_ms,
            step=self.step_ms,
            stop_event=watch.stop,
            rust_timeout=100,
            yield_on_timeout=True,
            raise_interrupt=False,
            force_polling=force_polling,
            poll_delay_ms=50,
            ignore_permission_denied=True,
        )
        return batches

    def _watch_loop(
        self, watchfiles: Any, layers: list[str], watch: _Watch, *, force_polling: bool
    ) -> None:
        if not layers:
            self.rebuild()
            watch.ready.set()
            watch.stop.wait()
            return
        batches = self._batches(watchfiles, layers, watch, force_polling=force_polling)
        first = True
        for changes in batches:
            if first:
                # The watch is live from here on: whatever happened before is reconciled,
                # and from then on a mirror entry the mirror did not write is the user's.
                self.rebuild()
                self.tree.stamps.live = True
                self._start_edit_watch(watch)
                watch.ready.set()
                first = False
            if changes:
                watch.batches += 1
                try:
                    self._sync_batch(changes)
                except OSError as exc:
                    log.warning("fork %s mirror sync failed: %s", self.fork_id, exc)

    def _start_edit_watch(self, watch: _Watch) -> None:
        if watch.edit_thread is None and not watch.stop.is_set():
            watch.edit_thread = threading.Thread(
                target=self._run_edits,
                args=(watch,),
                name=f"fork-ide-edits-{self.fork_id}",
                daemon=True,
            )
            watch.edit_thread.start()

    def _run_edits(self, watch: _Watch) -> None:
        """The user's edits in ``branches/`` (see ``edits.py``); once the watch is live,
        everything already there that the mirror did not write is applied first."""
        import watchfiles

        for force_polling in (False, True):
            try:
                batches = self._batches(
                    watchfiles, [str(self.branches_dir)], watch, force_polling=force_polling
                )
                first = True
                for changes in batches:
                    if first:
                        self.edits.edit_batch(self.edits.every_mirror_file())
                        first = False
                    if changes:
                        self.edits.edit_batch(raw for _change, raw in changes)
                return
            except Exception as exc:
                if watch.stop.is_set():
                    return
                log.warning("fork %s: watching the user's edits failed (%s)", self.fork_id, exc)

    def stop(self) -> None:
        """Stop the watchers (the mirror stays as it is)."""
        watch, self._watch = self._watch, None
        _WATCHING.discard(self)
        if watch is None:
            return
        watch.stop.set()
        for thread in (watch.thread, watch.edit_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(5)
        with contextlib.suppress(OSError):
            self.save_stamps()

    # -- ending ---------------------------------------------------------------------------------
    def cleanup(self, *, force: bool = False) -> bool:
        """Remove ``parent/``, ``branches/`` and ``mirror.json`` unless ``keep_artifacts``.

        Never touches the fork store's files (manifest, history, checkpoints): rewinding
        to a checkpoint needs them after the fork is resolved. Returns True when removed.
        """
        if self.keep_artifacts and not force:
            self._write_info("kept")
            return False
        remove_mirror(self.fork_dir)
        return True

    def close(self, *, cleanup: bool = True) -> None:
        """Stop watching, then ``cleanup()`` (a fork that stays open keeps its mirror with
        ``cleanup=False``; the next start rebuilds it)."""
        self.stop()
        if cleanup:
            if not self.keep_artifacts:  # (a kept mirror keeps the edit where it is)
                self.keep_unapplied()
            self.cleanup()
        self._release_lock(unlink=True)
        self.closed = True

    # -- hooking a coordinator -----------------------------------------------------------
    @classmethod
    def attach(
        cls,
        coordinator: ForkCoordinator,
        *,
        keep_artifacts: bool = False,
        step_ms: int = DEFAULT_STEP_MS,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
    ) -> MirrorHook:
        """Mirror every fork ``coordinator`` makes, from ``ForkCreated`` to ``ForkResolved``."""
        from branching_core.fork.mirror.hook import MirrorHook

        return MirrorHook(
            coordinator, keep_artifacts=keep_artifacts, step_ms=step_ms, debounce_ms=debounce_ms
        )

    @classmethod
    def for_coordinator(
        cls,
        coordinator: ForkCoordinator,
        *,
        keep_artifacts: bool = False,
        step_ms: int = DEFAULT_STEP_MS,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
    ) -> ForkMaterializer:
        """A mirror (not started) of ``coordinator``'s current fork and its live branches."""
        fork_id = coordinator.fork_id
        if fork_id is None:
            raise MirrorError("the coordinator has no fork to mirror")
        mat = cls(
            coordinator.workspace.path,
            fork_id,
            parent_root=coordinator.parent_path,
            keep_artifacts=keep_artifacts,
            step_ms=step_ms,
            debounce_ms=debounce_ms,
        )
        for rt in coordinator.branches.values():
            if rt.ws_branch is not None and rt.ws_branch.is_open:
                mat.add_branch(rt.label, rt.ws_branch)
        return mat

    def __repr__(self) -> str:
        return (
            f"<ForkMaterializer {self.fork_id} {len(self._branches)} branches at {self.fork_dir}>"
        )


def remove_mirror(fork_dir: Path) -> None:
    """Delete what a mirror owns in ``fork_dir`` (never the fork store's files)."""
    from branching_core.workspace.fsutil import rmtree

    for name in ("parent", "branches"):
        rmtree(fork_dir / name)
    for name in (MIRROR_FILE, LOCK_FILE, STAMPS_FILE):
        with contextlib.suppress(FileNotFoundError):
            (fork_dir / name).unlink()


__all__ = [
    "DEFAULT_DEBOUNCE_MS",
    "DEFAULT_STEP_MS",
    "STAMPS_FILE",
    "ForkMaterializer",
    "MirrorError",
    "mirror_dirname",
    "own_layer",
    "remove_mirror",
]
