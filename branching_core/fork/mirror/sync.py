"""The file-level rules that keep one fork's on-disk mirror equal to its branches.

A mirror is two trees under the fork directory::

    parent/<rel>            the parent's version of every path some branch touched
    branches/<dir>/<rel>    that branch's version of every path in ``parent/`` or that it
                            created (a path only a sibling changed holds the parent's bytes)

So ``parent/`` against ``branches/<dir>/`` in a directory diff tool shows exactly that
branch's changes: a file a sibling touched is present and equal on both sides, not
"deleted in this branch".

:class:`MirrorTree` owns those trees and nothing else. Its one operation, :meth:`sync`,
looks at the *current* state of a path (the branch's view against the parent's version
captured when the path was first touched) and makes the mirror agree, so it does not
matter how a change was made (a tool, ``sed -i`` in the sandbox, a test run), how
events were coalesced, or in which order they arrived: syncing a path twice is harmless,
and a full reconcile is just a sync of every candidate path.

Rules, per branch and path (files and symlinks; directories are walked):

* changed (content, symlink target, executable bits or type differ from the captured
  parent version, or the parent had nothing there): copied to ``branches/<dir>/<rel>``
  atomically (temporary file + rename, so a diff tool never reads a torn file);
* deleted: absent from ``branches/<dir>``, present in ``parent/`` (a deleted directory
  counts as every file under it);
* unchanged (including "rewritten with the same bytes"): a copy of the ``parent/`` version
  while some sibling touches the path; both copies are dropped once no branch does.

``parent/`` is captured lazily from the parent's view on first touch. The parent is not
written while a fork is open (merging is what ends the mirror), so that is the fork-time
version; a path a third party changed in between is captured with its bytes (the
limitation the seed documents too).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branching_core.fork.mirror.links import mirrored_target
from branching_core.fork.mirror.stamps import (
    PARENT_VERSION,
    Fingerprint,
    Stamp,
    StampBook,
    digest,
    fingerprint,
    stash,
)
from branching_core.workspace.paths import GIT_NAME, is_internal_path

log = logging.getLogger(__name__)

TMP_MARK = ".mirror-tmp-"
CONFLICTS_DIR = "conflicts"
"""``<fork dir>/conflicts/<dir>/<rel>``: the user's version of a path both sides changed."""
_CHUNK = 1 << 16


@dataclass
class MirroredBranch:
    """One branch as the mirror sees it.

    ``view`` is the branch's directory (what its tools see); ``layer`` is where its own
    writes physically land and what is watched (the overlay upper directory, or the view
    itself for the copy and reflink backends); ``dirname`` names ``branches/<dirname>``.
    """

    label: str
    dirname: str
    view: Path
    layer: Path
    branch: Any = None
    """The ``branching_core.workspace.Branch`` (``changes()`` for full reconciles)."""


def _kind(st: os.stat_result | None) -> str:
    if st is None:
        return "-"
    if stat.S_ISDIR(st.st_mode):
        return "d"
    if stat.S_ISLNK(st.st_mode):
        return "l"
    if stat.S_ISREG(st.st_mode):
        return "f"
    return "-"  # devices, fifos, sockets (and overlay whiteouts) are never mirrored


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _remove(path: Path) -> None:
    st = _lstat(path)
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _same_file(a: Path, a_st: os.stat_result, b: Path, rel: str) -> bool:
    """Same type, executable bits, symlink target (as the mirror shows it at ``rel``:
    ``links.mirrored_target``) or bytes (what a diff tool would show)."""
    b_st = _lstat(b)
    if b_st is None or _kind(a_st) != _kind(b_st):
        return False
    if stat.S_ISLNK(a_st.st_mode):
        return mirrored_target(rel, os.readlink(a)) == mirrored_target(rel, os.readlink(b))
    if stat.S_IMODE(a_st.st_mode) & 0o111 != stat.S_IMODE(b_st.st_mode) & 0o111:
        return False
    if a_st.st_size != b_st.st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            ca, cb = fa.read(_CHUNK), fb.read(_CHUNK)
            if ca != cb:
                return False
            if not ca:
                return True


def relevant(rel: str) -> bool:
    """False for the project state directory (never part of a branch) and our temp files."""
    if not rel or rel == "." or rel.startswith("../") or rel.startswith("/"):
        return False
    return not is_internal_path(rel) and TMP_MARK not in rel.rsplit("/", 1)[-1]


def walk_files(root: Path) -> Iterator[str]:
    """Relative paths of every non-directory entry under ``root`` (symlinks not followed)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != GIT_NAME]  # a repository: never mirrored
        filenames = [f for f in filenames if f != GIT_NAME]
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            yield name if rel_dir == "." else f"{rel_dir}/{name}"


class MirrorTree:
    """``parent/`` and ``branches/<dir>/`` of one fork, kept equal to the branches.

    Thread-safe: the watcher thread and the event loop (final flushes) may both sync.
    """

    def __init__(self, fork_dir: Path, parent_root: Path) -> None:
        self.fork_dir = fork_dir
        self.parent_root = parent_root
        self.parent_dir = fork_dir / "parent"
        self.branches_dir = fork_dir / "branches"
        self.lock = threading.RLock()
        self._base: dict[str, str] = {}  # rel -> kind captured from the parent ("-" absent)
        self._touched: dict[str, set[str]] = {}  # rel -> dirnames of branches touching it
        self._dirnames: set[str] = set()  # every mirrored branch, changed or not
        self._dirty: set[str] = set()  # paths whose untouched-branch copies need settling
        self.stamps = StampBook(self.branches_dir, parent_root)
        self.conflicts_dir = fork_dir / CONFLICTS_DIR
        self.pending_conflicts: list[tuple[str, str, Path | None]] = []
        """(dirname, rel, where the user's version was kept) found while syncing; drained
        by the edit watcher, which reports them."""
        self.parent_dir.mkdir(parents=True, exist_ok=True)
        self.branches_dir.mkdir(parents=True, exist_ok=True)
        # A mirror rebuilt after a restart keeps the fork-time copies it already has.
        for rel in walk_files(self.parent_dir):
            if relevant(rel):
                self._base[rel] = _kind(_lstat(self.parent_dir / rel))

    def register(self, dirname: str) -> None:
        """Give a branch its directory now (so a branch with no changes still has one that
        mirrors the captured parent paths)."""
        with self.lock:
            self._dirnames.add(dirname)
            self.branch_root(dirname).mkdir(parents=True, exist_ok=True)
            self._dirty.update(r for r, k in self._base.items() if k in ("f", "l"))
            self._settle()

    # -- queries -----------------------------------------------------------------------
    def branch_root(self, dirname: str) -> Path:
        return self.branches_dir / dirname

    def touched(self, dirname: str | None = None) -> list[str]:
        """Paths (files) touched by any branch, or by ``dirname``'s branch."""
        with self.lock:
            return sorted(
                rel for rel, who in self._touched.items() if dirname is None or dirname in who
            )

    # -- parent capture ------------------------------------------------------------------
    def _capture(self, rel: str) -> str:
        """The parent's kind at ``rel``, copying a file or symlink into ``parent/`` once."""
        kind = self._base.get(rel)
        if kind is not None:
            return kind
        source = self.parent_root / rel
        st = _lstat(source)
        kind = _kind(st)
        if kind in ("f", "l"):
            target = self.parent_dir / rel
            self._ensure_dir(self.parent_dir, target.parent)
            try:
                _copy_atomic(source, target, st, rel)
            except FileNotFoundError:
                kind = "-"
        self._base[rel] = kind
        self._dirty.add(rel)
        return kind

    def _drop_capture(self, rel: str) -> None:
        if self._base.pop(rel, None) in ("f", "l"):
            _remove(self.parent_dir / rel)
            _prune_empty(self.parent_dir, (self.parent_dir / rel).parent)
            self._dirty.add(rel)

    def _settle(self) -> None:
        """For each dirty path, every branch that did not touch it gets the parent's
        version (or loses its copy once the parent copy is gone)."""
        dirty, self._dirty = self._dirty, set()
        for rel in sorted(dirty):
            source = self.parent_dir / rel
            captured = self._base.get(rel) in ("f", "l")
            source_st = _lstat(source) if captured else None
            for dirname in self._dirnames:
                if dirname in self._touched.get(rel, ()):
                    continue
                root = self.branch_root(dirname)
                target = root / rel
                if source_st is not None:
                    if _same_file(source, source_st, target, rel):
                        self.stamps.adopt(dirname, rel, PARENT_VERSION, source)
                        continue
                    if self._yield_to_user(dirname, rel, None):
                        continue
                    self._ensure_dir(root, target.parent)
                    if _kind(_lstat(target)) == "d":
                        _remove(target)
                    with contextlib.suppress(FileNotFoundError):
                        self._put(dirname, rel, source, source_st, PARENT_VERSION)
                elif _lstat(target) is not None and _kind(_lstat(target)) != "d":
                    if self._yield_to_user(dirname, rel, None):
                        continue
                    self._drop(dirname, rel, PARENT_VERSION)
                    _prune_empty(root, target.parent)

    # -- touched bookkeeping -----------------------------------------------------------------
    def _touch(self, dirname: str, rel: str) -> None:
        self._touched.setdefault(rel, set()).add(dirname)
        self._dirty.add(rel)

    def _untouch(self, dirname: str, rel: str) -> None:
        who = self._touched.get(rel)
        if who is not None:
            who.discard(dirname)
            if not who:
                del self._touched[rel]
        self._dirty.add(rel)
        if rel not in self._touched:
            self._drop_capture(rel)

    def _untouch_under(self, dirname: str, rel: str) -> None:
        prefix = rel + "/"
        for other in [r for r in self._touched if r.startswith(prefix)]:
            self._untouch(dirname, other)

    # -- the one operation ---------------------------------------------------------------------
    def sync(self, branch: MirroredBranch, rels: Iterable[str]) -> int:
        """Make the mirror agree with ``branch`` for each of ``rels``; returns how many
        mirror entries were written or removed (for tests and figures)."""
        done = 0
        with self.lock:
            self._dirnames.add(branch.dirname)
            for rel in sorted({r for r in rels if relevant(r)}):
                done += self._sync_one(branch, rel)
            self._settle()
        return done

    def _sync_one(self, b: MirroredBranch, rel: str) -> int:
        source = b.view / rel
        target = self.branch_root(b.dirname) / rel
        st = _lstat(source)
        kind = _kind(st)
        base = self._capture(rel)
        if kind == "d":
            if base == "d":
                # An existing directory. With a separate layer (overlay), this event may be
                # its copy-up: files copied up right after it can land before the watcher
                # watches the new upper directory, so look at what the layer holds (only
                # changed entries, so this stays cheap). A copy-backend view was watched
                # from the start: its files have their own events.
                layer_dir = b.layer / rel
                if b.layer == b.view or not layer_dir.is_dir():
                    return 0
                return sum(self._sync_one(b, f"{rel}/{child}") for child in walk_files(layer_dir))
            # a new directory (or a file replaced by one): everything in it is new
            changed = 0
            if base in ("f", "l"):
                self._touch(b.dirname, rel)  # the parent's file is gone in this branch
            else:
                self._drop_capture(rel)
            if _kind(_lstat(target)) != "d":
                self._yield_to_user(b.dirname, rel, source)  # a conflict keeps the user's
                self._drop(b.dirname, rel, "d")
                self._ensure_dir(self.branch_root(b.dirname), target)
                changed += 1
            layer_dir = b.layer / rel
            walk_root = layer_dir if layer_dir.is_dir() else source
            for child in walk_files(walk_root):
                changed += self._sync_one(b, f"{rel}/{child}")
            return changed
        if kind == "-":  # gone from the branch (or never there)
            removed = 0
            if not self._yield_to_user_under(b, rel):
                removed = int(_lstat(target) is not None)
                self._drop(b.dirname, rel, "-")
            self._untouch_under(b.dirname, rel)
            if base in ("f", "l"):
                self._touch(b.dirname, rel)
            elif base == "d":  # a deleted directory: every file the parent had under it
                for child in walk_files(self.parent_root / rel):
                    sub = f"{rel}/{child}"
                    if self._capture(sub) in ("f", "l"):
                        self._touch(b.dirname, sub)
            else:
                self._untouch(b.dirname, rel)
            _prune_empty(self.branch_root(b.dirname), target.parent)
            return removed
        # a file or a symlink in the branch
        assert st is not None
        if base in ("f", "l") and _same_file(source, st, self.parent_dir / rel, rel):
            removed = 0
            if not self._yield_to_user(b.dirname, rel, source):
                removed = int(_lstat(target) is not None)
                self._drop(b.dirname, rel, PARENT_VERSION)
            self._untouch(b.dirname, rel)
            _prune_empty(self.branch_root(b.dirname), target.parent)
            return removed
        if base == "d":  # a directory replaced by a file: its files are deleted here
            for child in walk_files(self.parent_root / rel):
                sub = f"{rel}/{child}"
                if self._capture(sub) in ("f", "l"):
                    self._touch(b.dirname, sub)
        existing = _lstat(target)
        if existing is not None and _kind(existing) == kind and _same_file(source, st, target, rel):
            self.stamps.adopt(b.dirname, rel, "same", source)
            self._touch(b.dirname, rel)
            return 0
        if self._yield_to_user(b.dirname, rel, source):
            self._touch(b.dirname, rel)
            return 0
        self._ensure_dir(self.branch_root(b.dirname), target.parent)
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            self._yield_to_user_under(b, rel)
            _remove(target)
            self.stamps.removed_under(b.dirname, rel)
        try:
            self._put(b.dirname, rel, source, st, "same")
        except FileNotFoundError:  # deleted while we copied: the next event syncs it again
            return 0
        self._touch(b.dirname, rel)
        return 1

    def reconcile(self, branch: MirroredBranch) -> int:
        """Full resync of one branch: what ``changes()`` reports plus what is mirrored now."""
        candidates: set[str] = set(self.touched(branch.dirname))
        root = self.branch_root(branch.dirname)
        if root.is_dir():
            candidates.update(walk_files(root))
        if branch.branch is not None:
            changes = branch.branch.changes()
            candidates.update(changes.all_paths)
        return self.sync(branch, candidates)

    def prune_parent(self) -> None:
        """Drop ``parent/`` copies no branch touches (after a rebuild from an old mirror)."""
        with self.lock:
            for rel in [r for r in self._base if r not in self._touched]:
                self._drop_capture(rel)
            self._settle()

    # -- the mirror's own writes in branches/ (told apart from the user's) -------------------
    def _put(
        self, dirname: str, rel: str, source: Path, st: os.stat_result | None, view: str | None
    ) -> None:
        """Copy ``source`` to ``branches/<dirname>/<rel>`` and stamp it as the mirror's."""
        mirror, fp = _copy_atomic(source, self.branch_root(dirname) / rel, st, rel, stamp=True)
        if view == "same":  # a link leaving the branch is mirrored dead: its view differs
            view = digest(source) if st is not None and stat.S_ISLNK(st.st_mode) else mirror
        self.stamps.record(dirname, rel, Stamp(mirror, view, fp))

    def _drop(self, dirname: str, rel: str, view: str | None) -> None:
        """Remove ``branches/<dirname>/<rel>`` (file or directory) as the mirror."""
        target = self.branch_root(dirname) / rel
        if _kind(_lstat(target)) == "d":  # (only then: a stamp below stays what it is)
            self.stamps.removed_under(dirname, rel)
        _remove(target)
        self.stamps.record(dirname, rel, Stamp("-", view))

    def _yield_to_user(self, dirname: str, rel: str, view: Path | None) -> bool:
        """Called before the mirror overwrites or removes its copy of ``rel``.

        True when it must leave the copy alone: only the user changed it, and their edit is
        on its way into the branch (``view`` None: the branch does not touch the path).
        When the branch changed the path too since the last sync, that is a conflict: the
        user's version is kept under ``conflicts/`` and reported, and the branch's version
        may be mirrored (False). Never a silent overwrite.
        """
        if not self.stamps.user_changed(dirname, rel):
            return False
        if view is None:
            return True
        now = digest(view)
        if now == self.stamps.base_view(dirname, rel):
            return True
        entry = self.branch_root(dirname) / rel
        if digest(entry) == now:  # both made the very same change
            return False
        self.pending_conflicts.append(
            (dirname, rel, stash(entry, self.conflicts_dir, dirname, rel))
        )
        return False

    def _yield_to_user_under(self, b: MirroredBranch, rel: str) -> bool:
        """:meth:`_yield_to_user` for a path that may be a directory in the mirror."""
        target = self.branch_root(b.dirname) / rel
        if _kind(_lstat(target)) != "d":
            return self._yield_to_user(b.dirname, rel, b.view / rel)
        keep = False
        for child in walk_files(target):
            sub = f"{rel}/{child}"
            keep = self._yield_to_user(b.dirname, sub, b.view / sub) or keep
        return keep

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _ensure_dir(root: Path, directory: Path) -> None:
        """``mkdir -p`` inside ``root``, replacing any stale file standing where a dir must be."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
            return
        except (FileExistsError, NotADirectoryError):
            pass
        rel_parts = directory.relative_to(root).parts
        current = root
        for part in rel_parts:
            current = current / part
            st = _lstat(current)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                os.unlink(current)
            current.mkdir(exist_ok=True)


def _copy_atomic(
    source: Path, target: Path, st: os.stat_result | None, rel: str, *, stamp: bool = False
) -> tuple[str, Fingerprint | None]:
    """Copy via a temporary file + rename; with ``stamp``, the digest and fingerprint of
    what was written (taken from the temporary file: a rename keeps both, and no one else
    writes it, so a user's write racing ours is never taken for ours). A symlink at
    ``rel`` is recreated as ``links.mirrored_target`` says: never one leaving the tree."""
    tmp = target.with_name(f"{TMP_MARK}{target.name}-{threading.get_ident()}")
    _remove(tmp)
    if st is not None and stat.S_ISLNK(st.st_mode):
        os.symlink(mirrored_target(rel, os.readlink(source)), tmp)
    else:
        shutil.copy2(source, tmp, follow_symlinks=False)
    written = (digest(tmp), fingerprint(_lstat(tmp))) if stamp else ("", None)
    os.replace(tmp, target)
    return written


def _prune_empty(root: Path, directory: Path) -> None:
    """Remove empty directories from ``directory`` up to (not including) ``root``."""
    with contextlib.suppress(ValueError):
        directory.relative_to(root)
        while directory != root and directory.is_relative_to(root):
            try:
                directory.rmdir()
            except OSError:
                return
            directory = directory.parent


__all__ = ["MirrorTree", "MirroredBranch", "relevant", "walk_files"]
