# pyright: strict
"""The node-local snapshot cache: each snapshot materialised once per node, bounded.

Layout under the node's cache root::

    snapshots/<key>.lock      flock: shared while a task uses the tree (or builds it),
                              exclusive (non-blocking) to evict it
    snapshots/<key>.build     flock: exclusive while one task builds the tree
    snapshots/<key>/tree      the materialised workspace (read-only by convention:
                              tasks branch it copy-on-write, never write into it)
    snapshots/<key>/ready     written last; holds the tree's size; mtime = last use
    stores/<key>              the branch store of the workspace opened on ``tree``
    materialisations.log      one line per materialisation (what benchmarks count)

Concurrent tasks on one node agree through lock files, not an actor: the first
takes the build lock and builds, the rest wait on it and find ``ready``.
Beyond ``cache_bytes`` the least recently used trees that no task holds are
evicted right after a new one is built.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from branching_core.cluster.snapshot import Manifest
from branching_core.workspace.fsutil import rmtree

CACHE_ENV = "FORKDECK_RAY_CACHE"
DEFAULT_CACHE_BYTES = 2 << 30


def cache_root(explicit: str | None) -> Path:
    """``explicit`` (the runner's ``cache_dir``), else ``$FORKDECK_RAY_CACHE`` on this
    node, else ``~/.cache/forkdeck/ray``."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "forkdeck" / "ray"


@dataclass
class CachedTree:
    """A materialised snapshot held (shared lock) until ``release``."""

    key: str
    tree: Path
    store: Path
    materialised: bool
    _fd: int

    def release(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)  # drops the shared lock


def acquire(
    root: Path,
    key: str,
    get_meta: Callable[[], tuple[Manifest, dict[str, tuple[int, int, int]]]],
    get_pack: Callable[[int], bytes],
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> CachedTree:
    """The tree of snapshot ``key`` on this node, building it first if absent.

    ``get_meta`` (manifest, blob index) and ``get_pack`` are only called to build.
    """
    snaps = root / "snapshots"
    lock = snaps / f"{key}.lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:  # a new cache root: make its directories (once, not per task)
        snaps.mkdir(parents=True, exist_ok=True)
        (root / "stores").mkdir(exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # held until release: no eviction under a user
        ready = snaps / key / "ready"
        built = False
        if not ready.exists():
            # Builders queue on their own lock, never on the use lock: a waiting builder
            # must not wait for every task that already uses the tree to finish.
            build = os.open(snaps / f"{key}.build", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                            0o600)
            try:
                fcntl.flock(build, fcntl.LOCK_EX)
                if not ready.exists():
                    manifest, blobs = get_meta()
                    size = _materialise(snaps / key, manifest, blobs, get_pack)
                    ready.write_text(str(size))
                    with open(root / "materialisations.log", "a") as log:
                        log.write(f"{key} {os.getpid()} {time.time():.3f}\n")
                    built = True
            finally:
                os.close(build)
        _touch(ready)
    except BaseException:
        os.close(fd)
        raise
    held = CachedTree(key, snaps / key / "tree", root / "stores" / key, built, fd)
    if built:
        evict(root, cache_bytes, keep=key)
    return held


def _materialise(
    target: Path,
    manifest: Manifest,
    blobs: dict[str, tuple[int, int, int]],
    get_pack: Callable[[int], bytes],
) -> int:
    if target.exists():  # a half-built tree from a task that was killed mid-way
        rmtree(target)
    tree = target / "tree"
    tree.mkdir(parents=True)
    packs: dict[int, bytes] = {}
    size = 0
    dir_modes: list[tuple[str, int]] = []
    for rel, entry in manifest.items():  # parents come before children (scan order)
        path = tree / rel
        kind = entry[0]
        if kind == "d":
            path.mkdir(mode=0o700)
            dir_modes.append((rel, entry[1]))
        elif kind == "l":
            os.symlink(entry[1], path)
        elif kind == "f":
            pack, offset, length = blobs[entry[3]]
            if pack not in packs:
                packs[pack] = get_pack(pack)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                view = memoryview(packs[pack])[offset:offset + length]
                while view:
                    view = view[os.write(fd, view):]
                os.fchmod(fd, entry[1])
            finally:
                os.close(fd)
            size += length
    for rel, mode in reversed(dir_modes):  # deepest first, so a read-only parent comes last
        os.chmod(tree / rel, mode)
    return size


TOUCH_EVERY = 10.0
"""Seconds between two updates of a tree's last-use time: eviction is least recently used
at that grain, and a journaled metadata write per task is not free on a busy disk."""


def _touch(ready: Path) -> None:
    """Mark the tree used now, unless it was marked within ``TOUCH_EVERY`` seconds."""
    if time.time() - ready.stat().st_mtime >= TOUCH_EVERY:
        os.utime(ready)


def evict(root: Path, cache_bytes: int, keep: str | None = None) -> list[str]:
    """Drop least recently used trees nobody holds until the cache fits ``cache_bytes``."""
    snaps = root / "snapshots"
    entries: list[tuple[float, int, str]] = []
    for ready in snaps.glob("*/ready"):
        with contextlib.suppress(OSError, ValueError):
            entries.append((ready.stat().st_mtime, int(ready.read_text() or 0),
                            ready.parent.name))
    total = sum(size for _, size, _ in entries)
    evicted: list[str] = []
    for _, size, key in sorted(entries):
        if total <= cache_bytes:
            break
        if key == keep:
            continue
        fd = os.open(snaps / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # a task is using it
        try:
            (snaps / key / "ready").unlink(missing_ok=True)
            rmtree(snaps / key)
            rmtree(root / "stores" / key)
            total -= size
            evicted.append(key)
        finally:
            os.close(fd)
    return evicted


__all__ = ["CACHE_ENV", "DEFAULT_CACHE_BYTES", "CachedTree", "acquire", "cache_root", "evict"]
