"""A content-addressed snapshot of a workspace, ready to ship to other machines.

The manifest maps every relative path to what it is: a directory (mode), a
symlink (target) or a regular file (mode, size, sha256 of the content). Its own
hash (sha256 of the canonical JSON) names the snapshot, so two snapshots of the
same tree have the same key and a node that already holds one never fetches it
again. File contents are deduplicated by hash and packed into a few large blobs
(``PACK_BYTES`` each) so a 10,000-file tree is a handful of object-store puts,
not ten thousand. The project's own state directory (``.pydantic-deep``) is
never shipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branching_core.errors import OperationError
from branching_core.workspace.fsutil import PROJECT_STATE_DIR

PACK_BYTES = 8 << 20
EXCLUDED_TOP = frozenset({PROJECT_STATE_DIR})

# Manifest entries: ("d", mode) | ("l", target) | ("f", mode, size, sha256)
Entry = tuple[Any, ...]
Manifest = dict[str, Entry]


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def entry_for(path: Path) -> Entry | None:
    """The manifest entry of whatever is at ``path`` now (``None``: nothing there)."""
    found = _lstat_entry(str(path))
    if not isinstance(found, os.stat_result):
        return found
    return ("f", stat.S_IMODE(found.st_mode), found.st_size, file_sha256(path))


def _lstat_entry(path: str) -> Entry | os.stat_result | None:
    """The entry of anything but a regular file at ``path``; a regular file's stat (its
    entry needs a hash: the caller knows whether an earlier one can be reused)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISDIR(st.st_mode):
        return ("d", stat.S_IMODE(st.st_mode))
    if stat.S_ISLNK(st.st_mode):
        return ("l", os.readlink(path))
    if not stat.S_ISREG(st.st_mode):
        return ("x", stat.S_IFMT(st.st_mode))  # a device, fifo or socket: never shipped
    return st


def scan(root: Path) -> Manifest:
    """Every path under ``root`` (but the project state directory) with its entry.

    A file whose inode, size, mtime and ctime are those it had at the previous scan of
    ``root`` keeps the hash computed then (``_HashCache``), so re-snapshotting an
    unchanged workspace (every pattern call on a ``RayRunner``) reads no file contents.
    The walk is ``os.walk``'s (top down, a directory's subdirectories then its files,
    each sorted; symlinked directories listed, not entered) on ``os.scandir`` entries,
    whose ``lstat`` needs no path built per file: half the cost of a walk plus
    ``os.lstat`` per path, which every Ray task's ship pays."""
    root_key = os.fspath(root)
    previous = _HASHES.get(root_key)
    cache = _HashCache(previous)
    manifest: Manifest = {}
    _scan_dir(root_key, "", cache, manifest)
    _remember(root_key, cache.seen)
    return manifest


def _scan_dir(path: str, rel_dir: str, cache: _HashCache, manifest: Manifest) -> None:
    try:
        with os.scandir(path) as it:
            found = list(it)
    except OSError:
        return  # gone or unreadable meanwhile: skipped, as os.walk does
    dirs: list[os.DirEntry[str]] = []
    files: list[os.DirEntry[str]] = []
    for one in found:
        if not rel_dir and one.name in EXCLUDED_TOP:
            continue
        try:
            is_dir = one.is_dir()
        except OSError:
            is_dir = False
        (dirs if is_dir else files).append(one)
    dirs.sort(key=lambda e: e.name)
    files.sort(key=lambda e: e.name)
    for one in [*dirs, *files]:
        rel = f"{rel_dir}/{one.name}" if rel_dir else one.name
        entry = cache.entry_of(one, rel)
        if entry is not None and entry[0] != "x":
            manifest[rel] = entry
    for one in dirs:
        try:
            symlink = one.is_symlink()
        except OSError:
            continue
        if not symlink:  # os.walk does not descend into symlinked directories either
            _scan_dir(one.path, f"{rel_dir}/{one.name}" if rel_dir else one.name, cache, manifest)


RACY_NS = 1_000_000_000
"""A file changed less than this before its hash was taken is hashed again next scan:
a second write within one timestamp tick could leave size, mtime and ctime as they were
(git's "racily clean" rule, with a wide margin)."""
_MAX_ROOTS = 8
Signature = tuple[int, int, int, int, int]
_HASHES: dict[str, dict[str, tuple[Signature, str]]] = {}
_HASHES_LOCK = threading.Lock()


class _HashCache:
    """One scan's view of the previous scan's hashes, and what this scan saw."""

    def __init__(self, previous: dict[str, tuple[Signature, str]] | None) -> None:
        self.previous = previous or {}
        self.seen: dict[str, tuple[Signature, str]] = {}

    def entry_of(self, found: os.DirEntry[str], rel: str) -> Entry | None:
        """``found``'s entry (its ``lstat`` is one syscall on its already-built path)."""
        path = found.path
        try:
            st = found.stat(follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISDIR(st.st_mode):
            return ("d", stat.S_IMODE(st.st_mode))
        if stat.S_ISLNK(st.st_mode):
            try:
                return ("l", os.readlink(path))
            except (FileNotFoundError, NotADirectoryError):
                return None
        if not stat.S_ISREG(st.st_mode):
            return ("x", stat.S_IFMT(st.st_mode))  # a device, fifo or socket: never shipped
        mode = stat.S_IMODE(st.st_mode)
        sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        known = self.previous.get(rel)
        if known is not None and known[0] == sig:
            digest = known[1]
        else:
            hashed_at = time.time_ns()
            digest = file_sha256(path)
            if max(st.st_mtime_ns, st.st_ctime_ns) + RACY_NS > hashed_at:
                return ("f", mode, st.st_size, digest)  # too fresh to trust next time
        self.seen[rel] = (sig, digest)
        return ("f", mode, st.st_size, digest)


def _remember(root: str, seen: dict[str, tuple[Signature, str]]) -> None:
    """Keep this scan's hashes for the next scan of ``root`` (a few roots at most)."""
    with _HASHES_LOCK:
        _HASHES.pop(root, None)
        _HASHES[root] = seen
        while len(_HASHES) > _MAX_ROOTS:
            del _HASHES[next(iter(_HASHES))]


def manifest_hash(manifest: Manifest) -> str:
    canonical = json.dumps(sorted(manifest.items()), separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class Snapshot:
    """A manifest plus its content, packed: ``blobs[sha] = (pack, offset, size)``."""

    root: Path
    manifest: Manifest
    key: str
    packs: list[bytes] = field(default_factory=list[bytes])
    blobs: dict[str, tuple[int, int, int]] = field(default_factory=dict[str, tuple[int, int, int]])
    taken_ns: int = 0
    """When the scan began: a delta lands with ``since_ns`` = this,
    under the one conflict rule of every landing (``workspace.land.land_files``)."""

    @property
    def content_bytes(self) -> int:
        return sum(len(p) for p in self.packs)


_KEYS: dict[str, tuple[Manifest, str]] = {}  # root -> its last manifest and that one's key


def take(root: Path) -> Snapshot:
    """Scan ``root``: the manifest and its key (contents are packed by ``pack``).

    A manifest equal to the previous one of ``root`` keeps its key (comparing two dicts
    costs far less than the canonical JSON and its sha256)."""
    taken_ns = time.time_ns()  # as a branch's created_ns: the same rule, the same clock
    manifest = scan(root)
    root_key = os.fspath(root)
    with _HASHES_LOCK:
        last = _KEYS.get(root_key)
    if last is not None and last[0] == manifest:
        key = last[1]
    else:
        key = manifest_hash(manifest)
        with _HASHES_LOCK:
            _KEYS.pop(root_key, None)
            _KEYS[root_key] = (dict(manifest), key)  # a caller may change its own
            while len(_KEYS) > _MAX_ROOTS:
                del _KEYS[next(iter(_KEYS))]
    return Snapshot(root=root, manifest=manifest, key=key, taken_ns=taken_ns)




def pack(snap: Snapshot) -> Snapshot:
    """Read each distinct file content once into ``snap.packs``; returns ``snap``."""
    current = bytearray()
    for rel, entry in snap.manifest.items():
        if entry[0] != "f" or entry[3] in snap.blobs:
            continue
        data = (snap.root / rel).read_bytes()
        if hashlib.sha256(data).hexdigest() != entry[3]:
            raise OperationError(f"{rel} changed while the workspace was being snapshotted")
        if current and len(current) + len(data) > PACK_BYTES:
            snap.packs.append(bytes(current))
            current = bytearray()
        snap.blobs[entry[3]] = (len(snap.packs), len(current), len(data))
        current += data
    if current or not snap.packs:
        snap.packs.append(bytes(current))
    return snap


__all__ = ["Entry", "Manifest", "Snapshot", "entry_for", "file_sha256", "manifest_hash",
           "pack", "scan", "take"]
