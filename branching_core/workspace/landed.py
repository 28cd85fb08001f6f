# pyright: strict
"""The parent's own record of what forkdeck's landings did to it since a branch was made.

Why it exists: the one conflict rule (``changes.find_conflicts``) must know whether a path
a branch writes, and that the parent no longer has, was in the parent when the branch was
made (someone deleted it since: a conflict, or applying it would bring it back) or not (the
branch created it: no conflict). The copy backends know from their manifest. Overlay does
not: any writer that saves by temp file + rename (editors, ``sed -i``, agent CLIs, anything
in a sandbox) leaves an upper file that looks exactly like a new one, so overlay says
``existed=None`` and the rule has to ask the parent. The parent's directory change time
says *whether* its entries changed since the fork; this record says *how*, when every such
change was one of forkdeck's own landings (a sibling's commit, a combine, a sub-agent's
paths, a Ray delta): exactly which paths they removed. A change nobody recorded (the user
editing by hand, another program) leaves the answer unknown (``None``); the rule then falls
back on what the branch itself knows (a copied-up file may have been there, a file with no
trace of the parent is taken for the branch's own: ``changes._may_have_existed`` says why).

The record is one line per landing (JSON), appended by the journal's first pass under the
commit lock (``Journal.apply``): for each directory whose entries or mode the landing
changed, its ``ctime`` just before and just after, and the paths it deleted. A directory's
changes since the fork are all accounted for when its current ``ctime`` is the "after" of
the last landing that touched it, whose "before" is the "after" of the one before, and so
on back to a "before" no later than the fork. It costs two ``lstat`` per touched directory
and one append per landing. It lives beside the parent's generation (``gen/<id>.landed``)
and goes with it (``Store.drop_generation``, ``sweep_generations``); it is trimmed to its
newer half past ``MAX_BYTES`` (a branch older than what is kept is judged as after a
change by hand).
A crash, a replay or a failed append just leaves a landing unrecorded: that directory is
then judged as after a change by hand.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from branching_core.workspace.changes import Op
from branching_core.workspace.store import LANDED_SUFFIX

RECORD_DIR = "gen"  # beside the parent's generation, bookkeeping of the same kind
MAX_BYTES = 1 << 20
_MISSING = -1  # a directory's "ctime" before the landing that made it

Entry = tuple[dict[str, tuple[int, int]], tuple[str, ...]]


def record_path(store_root: Path, parent_id: str) -> Path:
    """Where the landings into ``parent_id`` are recorded (in the store, not the tree)."""
    return store_root / RECORD_DIR / f"{parent_id}{LANDED_SUFFIX}"


def touched_dirs(ops: Iterable[Op]) -> list[str]:
    """The directories whose entries (or mode) ``ops`` change: each op's directory, and the
    op's own path for a mkdir or chmod. Relative; "" is the root."""
    dirs: set[str] = set()
    for op in ops:
        dirs.add(op.path.rpartition("/")[0])
        if op.kind in ("mkdir", "chmod"):
            dirs.add(op.path)
    return sorted(dirs)


def dir_ctimes(root: str, dirs: Iterable[str]) -> dict[str, int]:
    """``ctime`` (ns) of each directory under ``root`` now, ``-1`` where there is none."""
    out: dict[str, int] = {}
    for rel in dirs:
        try:
            out[rel] = os.lstat(f"{root}/{rel}" if rel else root).st_ctime_ns
        except OSError:
            out[rel] = _MISSING
    return out


def append(
    store_root: Path, parent_id: str, root: str, before: dict[str, int], ops: Iterable[Op]
) -> None:
    """Record a landing that has just been applied to ``root`` (``before``: its
    :func:`dir_ctimes` taken just before its first op). Never raises: a landing left
    unrecorded is judged later as a change by hand."""
    with contextlib.suppress(Exception):
        after = dir_ctimes(root, before)
        line = json.dumps(
            {
                "dirs": {rel: [before[rel], after[rel]] for rel in before},
                "removed": sorted({op.path for op in ops if op.kind == "delete"}),
            },
            separators=(",", ":"),
        ) + "\n"
        path = record_path(store_root, parent_id)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            path.parent.mkdir(exist_ok=True)
            fd = os.open(path, flags, 0o644)
        try:
            size = os.fstat(fd).st_size
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        if size + len(line) > MAX_BYTES:
            _trim(path)


def _trim(path: Path) -> None:
    """Keep the newer half of the record (the caller holds the commit lock)."""
    lines = path.read_bytes().splitlines(keepends=True)
    tmp = path.with_name(f".{path.name}.tmp-trim")  # swept by Store.sweep_temp_files
    tmp.write_bytes(b"".join(lines[len(lines) // 2 :]))
    os.replace(tmp, path)


class LandingRecord:
    """The landings recorded for one parent, read once when first needed."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._entries: list[Entry] | None = None

    @classmethod
    def of(cls, store_root: Path, parent_id: str) -> LandingRecord:
        return cls(record_path(store_root, parent_id))

    def _load(self) -> list[Entry]:
        if self._entries is None:
            entries: list[Entry] = []
            try:
                data = self._path.read_bytes()
            except OSError:
                data = b""
            for raw in data.splitlines():
                with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
                    item = json.loads(raw)
                    dirs = {str(k): (int(v[0]), int(v[1])) for k, v in item["dirs"].items()}
                    entries.append((dirs, tuple(str(p) for p in item["removed"])))
            self._entries = entries
        return self._entries

    def removed_since(self, rel: str, dir_ctime_ns: int, since_ns: int) -> bool | None:
        """Did the parent lose ``rel`` after ``since_ns``, its directory's ``ctime`` being
        ``dir_ctime_ns`` now (later than ``since_ns``)?

        True: a recorded landing removed it (or a directory above it). False: every change
        to its directory since then was a recorded landing, and none removed it. None:
        something nobody recorded changed that directory (by hand, another program, a
        landing older than the record), so it may have been removed.
        """
        directory = rel.rpartition("/")[0]
        wanted = dir_ctime_ns
        for dirs, removed in reversed(self._load()):
            span = dirs.get(directory)
            if span is None:
                continue
            before, after = span
            if after != wanted:
                return None  # changed again after this landing, unrecorded
            if any(rel == gone or rel.startswith(gone + "/") for gone in removed):
                return True
            if before == _MISSING:
                return None  # made by this landing: what held it before is unknown
            if before <= since_ns:
                return False
            wanted = before
        return None


__all__ = [
    "LandingRecord",
    "append",
    "dir_ctimes",
    "record_path",
    "touched_dirs",
]
