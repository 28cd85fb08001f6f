"""What the mirror itself last wrote at each branch path, so a user's edit is told apart.

The mirror's ``branches/<dir>/`` trees are written by two parties: the mirror (syncing a
branch's view, or copying the parent's version of a sibling's path) and the user (an IDE
open on that directory). Both produce the same filesystem events, so each mirror write
is recorded here as a :class:`Stamp`: the content digest it left (``"-"`` for a removal),
the ``lstat`` fingerprint of the entry it created (inode, size, mtime, mode: a rename
keeps them, so the common case costs no hashing), and what the branch's view held at
that moment. An entry that no longer matches its stamp was changed by someone else: the
user. The view digest is the "last sync" base a conflict is judged against.

The book is also saved (:func:`save_stamps`, ``mirror-stamps.json`` beside the mirror, one
atomic rename) after every batch, so a process that starts after a crash or a kill can
still tell what the user changed in the mirror while no one watched
(:meth:`StampBook.load`).
A stamp a kill kept from being saved is harmless: the mirror only ever writes what the
branch's view holds, and an entry equal to the view is never taken for an edit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branching_core.atomicio import atomic_write

log = logging.getLogger(__name__)
STAMPS_VERSION = 1

_CHUNK = 1 << 16

Fingerprint = tuple[int, int, int, int]

PARENT_VERSION = None
"""``Stamp.view`` for "the view shows the parent's version" (digested only when needed)."""


def fingerprint(st: os.stat_result | None) -> Fingerprint | None:
    if st is None:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)


def lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def digest(path: Path) -> str:
    """``"-"`` (absent or not a file), ``"d"``, ``"l:<target>"`` or ``"f[x]:<sha256>"``."""
    st = lstat(path)
    if st is None:
        return "-"
    if stat.S_ISDIR(st.st_mode):
        return "d"
    if stat.S_ISLNK(st.st_mode):
        try:
            return "l:" + os.readlink(path)
        except OSError:
            return "-"
    if not stat.S_ISREG(st.st_mode):
        return "-"
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return "-"
    x = "x" if st.st_mode & 0o111 else ""
    return f"f{x}:{h.hexdigest()}"


@dataclass(frozen=True)
class Stamp:
    """What the mirror left at one ``(branch dir, path)`` and what the view held then."""

    mirror: str
    view: str | None
    """The view's digest at that sync; :data:`PARENT_VERSION` when it is the parent's version."""
    fp: Fingerprint | None = None


class StampBook:
    """Every mirror write per ``(dirname, rel)``; callers hold the mirror tree's lock."""

    def __init__(self, branches_dir: Path, parent_root: Path) -> None:
        self.branches_dir = branches_dir
        self.parent_root = parent_root
        self.live = False
        """False until the first full reconcile adopted what was on disk: before that,
        nothing in the mirror is taken for a user edit."""
        self._stamps: dict[tuple[str, str], Stamp] = {}
        self.dirty = False
        """Changed since the last :func:`save_stamps`."""
        self.save_lock = threading.Lock()
        """Serialises :func:`save_stamps` (an older snapshot never lands after a newer one)."""

    def get(self, dirname: str, rel: str) -> Stamp | None:
        return self._stamps.get((dirname, rel))

    def record(self, dirname: str, rel: str, stamp: Stamp) -> None:
        """The mirror just left ``stamp.mirror`` at the path."""
        self._stamps[(dirname, rel)] = stamp
        self.dirty = True

    def removed_under(self, dirname: str, rel: str) -> None:
        """A directory the mirror removed: everything recorded under it is gone too."""
        prefix = rel + "/"
        for key in [k for k in self._stamps if k[0] == dirname and k[1].startswith(prefix)]:
            self._stamps[key] = Stamp("-", "-")
            self.dirty = True

    def adopt(self, dirname: str, rel: str, view: str | None, source: Path) -> None:
        """The mirror entry was just found equal to ``source`` (what it should hold): record
        it as ours (when it is not recorded already with this very fingerprint). ``view``
        is the view's digest, ``"same"`` for "what ``source`` holds", or
        :data:`PARENT_VERSION`.

        The caller compared the entry a moment ago, without holding anything the user's
        editor respects: the user may have deleted or rewritten it since. So the entry is
        recorded only when it still equals ``source`` now, with one stable fingerprint
        around the digest; otherwise the book is left as it was, and the entry stays the
        user's (a delete or an edit recorded here as the mirror's own would never be
        applied, and the next sync would silently undo it).
        """
        target = self.branches_dir / dirname / rel
        st = lstat(target)
        rec = self._stamps.get((dirname, rel))
        if rec is not None and rec.fp is not None and rec.fp == fingerprint(st):
            return
        if st is None:
            return
        d = digest(target)
        if fingerprint(lstat(target)) != fingerprint(st) or d != digest(source):
            return
        self._stamps[(dirname, rel)] = Stamp(d, d if view == "same" else view, fingerprint(st))
        self.dirty = True

    def user_changed(self, dirname: str, rel: str) -> bool:
        """True when the mirror entry is not what the mirror last left there."""
        if not self.live:
            return False
        target = self.branches_dir / dirname / rel
        st = lstat(target)
        rec = self._stamps.get((dirname, rel))
        if rec is None or rec.mirror == "-":
            return st is not None and not stat.S_ISDIR(st.st_mode)
        if st is not None and rec.fp is not None and fingerprint(st) == rec.fp:
            return False
        return digest(target) != rec.mirror

    def base_view(self, dirname: str, rel: str) -> str:
        """The view's digest at the last sync of this path (the parent's when unrecorded)."""
        rec = self._stamps.get((dirname, rel))
        if rec is not None and rec.view is not None:
            return rec.view
        return digest(self.parent_root / rel)

    def forget(self, dirname: str, rel: str, *, mirror: str, view: str | None) -> None:
        """Take the entry's current state as settled (a conflict stashed it, or the user's
        edit was applied): record it without a fingerprint so it is re-checked by digest."""
        self._stamps[(dirname, rel)] = Stamp(mirror, view, None)
        self.dirty = True

    def mirrored(self, dirname: str) -> list[str]:
        """Paths where the mirror last left an entry in ``branches/<dirname>/`` (a user who
        deleted one while no one watched is found through these)."""
        return [k[1] for k, st in self._stamps.items() if k[0] == dirname and st.mirror != "-"]

    def to_json(self, labels: dict[str, str]) -> bytes:
        """The book as JSON; ``labels`` (dirname -> branch label) is saved with it so a
        later process only takes the stamps of the same branch in the same directory."""
        rows = [
            [d, rel, st.mirror, st.view, list(st.fp) if st.fp is not None else None]
            for (d, rel), st in self._stamps.items()
        ]
        data = {"version": STAMPS_VERSION, "labels": labels, "stamps": rows}
        return json.dumps(data, separators=(",", ":")).encode()

    def load(self, data: dict[str, Any], labels: dict[str, str]) -> int:
        """Take the saved stamps of the directories whose label is still the same; returns
        how many were taken."""
        saved = data.get("labels") if data.get("version") == STAMPS_VERSION else None
        if not isinstance(saved, dict):
            return 0
        same = {d for d, label in labels.items() if saved.get(d) == label}
        taken = 0
        for row in data.get("stamps") or []:
            try:
                d, rel, mirror, view, fp = row
                if d not in same:
                    continue
                print_ = (int(fp[0]), int(fp[1]), int(fp[2]), int(fp[3])) if fp else None
                self._stamps[(str(d), str(rel))] = Stamp(str(mirror), view, print_)
                taken += 1
            except (TypeError, ValueError, IndexError):
                continue
        return taken

    def paths_under(self, dirname: str, rel: str) -> list[str]:
        prefix = rel + "/"
        return [k[1] for k in self._stamps if k[0] == dirname and k[1].startswith(prefix)]


def stash_path(conflicts_dir: Path, dirname: str, rel: str) -> Path:
    """A free ``conflicts/<dirname>/<rel>`` (``.2``, ``.3``... when an earlier one is kept)."""
    target = conflicts_dir / dirname / rel
    n = 2
    while lstat(target) is not None:
        target = conflicts_dir / dirname / f"{rel}.{n}"
        n += 1
    return target


def stash(source: Path, conflicts_dir: Path, dirname: str, rel: str) -> Path | None:
    """Copy the user's version at ``source`` aside; None when there is no file to keep."""
    st = lstat(source)
    if st is None or not stat.S_ISREG(st.st_mode):
        return None
    import shutil

    target = stash_path(conflicts_dir, dirname, rel)
    target.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        shutil.copy2(source, target)
        return target
    return None


def save_stamps(book: StampBook, path: Path, labels: dict[str, str], lock: Any) -> bool:
    """Write ``book`` to ``path`` (atomic rename) when it changed; ``lock`` is the mirror
    tree's (held while the book is read). False when writing failed (logged)."""
    with book.save_lock:
        with lock:
            if not book.dirty:
                return True
            payload = book.to_json(labels)
            book.dirty = False
        try:
            atomic_write(path, payload)
        except OSError as exc:
            book.dirty = True
            log.warning("cannot save the mirror's stamps to %s: %s", path, exc)
            return False
        return True


__all__ = [
    "PARENT_VERSION",
    "Stamp",
    "StampBook",
    "digest",
    "fingerprint",
    "save_stamps",
    "stash",
]
