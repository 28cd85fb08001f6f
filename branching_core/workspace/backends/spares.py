"""Spare overlay branch directories, made by the mount helper ahead of the batch that
takes them.

Why: creating a branch costs four ``mkdir``s, a ``mknod`` and an overlay mount, all in the
branch store, where directory operations are slow on a loaded machine; a fork or a
pattern pays that for every candidate on its critical path. After answering a batch, the
helper makes as many spares (``<store>/spare/<sid>-<n>-s<i>``, built under a ``.part``
name and renamed into place, so each is whole or absent) while the caller runs the
candidates it just got; the next batch takes each with one ``rename``. For a batch of
top-level siblings the spares' views are mounted ahead too (on the workspace, the same
layers every such batch has): the mount moves with the renamed directory, so that batch
pays no mount at all. A mounted-ahead view shows the workspace as it is when it is
first used, like a view mounted on the spot: nothing looks into it before.

One pool per store and process, shared by every ``Workspace`` object on that store, so
objects that come and go do not pile up spares. The helper stops making spares as soon
as another request is waiting, and a branch naming a spare that is not there is made
the ordinary way, so a pool entry is a hint, never a promise. ``close`` (a workspace's
close, interpreter exit) unmounts and discards them; after a crash the helper's
namespace (and every mount) is gone and the next open sweeps ``spare/`` entries of dead
sessions (``Store.sweep_spares``). A forked child starts from an empty pool.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import threading
from pathlib import Path

from branching_core.errors import MountError
from branching_core.workspace.fsutil import PROJECT_STATE_DIR
from branching_core.workspace.mount_helper import MountHelper, Spare, running_helper
from branching_core.workspace.reaper import discard_dirs

# A branch's store directory as made before mounting (what a spare holds)
SPARE_DIRS = ("upper", "work", "view")
WHITEOUT = f"upper/{PROJECT_STATE_DIR}"
SPARE_DIR = "spare"
MAX_SPARES = 64
MountKey = tuple[tuple[str, ...], bool]  # (lower layers, redirect format)


class SparePool:
    """The spares of one store in this process: plain ones, and ones mounted on given
    layers. ``lock`` is held by a caller from taking spares until its request to the
    helper is answered, so no other thread can name a spare in a request that reaches
    the helper first."""

    def __init__(self, store_root: Path) -> None:
        self.store_root = store_root
        self.lock = threading.Lock()
        self._plain: list[Path] = []
        self._mounted: dict[MountKey, list[Path]] = {}
        self._pid = os.getpid()
        self._maker: int | None = None  # the pid of the helper that makes these spares

    def take(
        self,
        first_id: str,
        count: int,
        lower: list[Path] | None,
        redirect: bool,
        helper_pid: int | None = None,
    ) -> tuple[list[tuple[Path | None, bool]], list[Spare]]:
        """Spares for ``count`` new branches, each (path or None, already mounted?), and
        the spares to make for the next batch (they join the pool at once). ``lower``:
        spares mounted on these layers are wanted, and made; else plain ones.
        ``helper_pid``: the helper the request goes to. Spares another helper made (one
        that was killed, and replaced) are discarded, never handed out: a mounted one's
        view existed only in its maker's mount namespace, and died with it."""
        if self._pid != os.getpid():  # a forked child: those are the parent's
            self._plain, self._mounted, self._pid = [], {}, os.getpid()
        if helper_pid is not None and helper_pid != self._maker:
            stale = [*self._plain, *(p for pool in self._mounted.values() for p in pool)]
            self._plain, self._mounted, self._maker = [], {}, helper_pid
            if stale:
                trash = self.store_root / "trash"
                discard_dirs([(spare, trash / spare.name) for spare in stale])
        key: MountKey | None = (
            (tuple(str(p) for p in lower), redirect) if lower is not None else None
        )
        taken: list[tuple[Path | None, bool]] = []
        sources = [(self._mounted.setdefault(key, []), True)] if key is not None else []
        for pool, mounted in [*sources, (self._plain, False)]:
            grab = pool[: count - len(taken)]
            del pool[: len(grab)]
            taken += [(spare, mounted) for spare in grab]
        taken += [(None, False)] * (count - len(taken))
        pool = self._mounted[key] if key is not None else self._plain
        want = min(count, MAX_SPARES) - len(pool)
        make = [
            Spare(
                self.store_root / SPARE_DIR / f"{first_id}-s{i}",
                list(SPARE_DIRS),
                [WHITEOUT],
                lower=lower,
                redirect=redirect,
            )
            for i in range(max(0, want))
        ]
        pool.extend(one.root for one in make)
        return taken, make

    def put_back(
        self, spares: list[tuple[Path | None, bool]], lower: list[Path] | None, redirect: bool
    ) -> None:
        """Spares taken for a batch that failed and that still exist."""
        key: MountKey | None = (
            (tuple(str(p) for p in lower), redirect) if lower is not None else None
        )
        for spare, mounted in spares:
            if spare is not None and spare.exists():
                if mounted and key is not None:
                    self._mounted.setdefault(key, []).append(spare)
                elif not mounted:
                    self._plain.append(spare)

    def close(self) -> None:
        """Unmount (one request, answered once the helper stopped making spares) and
        discard every spare; one still mounted afterwards is left for the next open."""
        with self.lock:
            if self._pid != os.getpid():
                return
            plain = self._plain
            mounted = [spare for pool in self._mounted.values() for spare in pool]
            self._plain, self._mounted = [], {}
            if not plain and not mounted:
                return
            still: set[Path] = set()
            helper = running_helper(self.store_root)  # none: it is gone, and every mount with it
            if helper is not None and mounted:
                with contextlib.suppress(MountError, OSError):
                    helper.sync()
                    helper.umount_many([spare / "view" for spare in mounted if spare.exists()])
                with contextlib.suppress(OSError):
                    still = _mount_points_under(helper, self.store_root / SPARE_DIR)
            trash = self.store_root / "trash"
            discard_dirs(
                [
                    (spare, trash / spare.name)
                    for spare in [*plain, *mounted]
                    if spare / "view" not in still
                ]
            )


_POOLS: dict[Path, SparePool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(store_root: Path) -> SparePool:
    """The process's spare pool for ``store_root``."""
    with _POOLS_LOCK:
        pool = _POOLS.get(store_root)
        if pool is None:
            pool = _POOLS[store_root] = SparePool(store_root)
        return pool


@atexit.register
def close_all() -> None:
    """Interpreter exit (runs after the workspaces' own exit handler, which shuts the
    mount helper down, and before the reaper's drain, which removes what this discards)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
    for pool in pools:
        with contextlib.suppress(Exception):
            pool.close()


def _mount_points_under(helper: MountHelper, directory: Path) -> set[Path]:
    """Mount points below ``directory`` in the helper's namespace."""
    prefix = f"{directory}/"
    found: set[Path] = set()
    with open(f"/proc/{helper.pid}/mounts") as fh:
        for line in fh:
            # /proc/<pid>/mounts escapes space, tab, newline and backslash as \ooo
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[1])
            if point.startswith(prefix):
                found.add(Path(point))
    return found


__all__ = ["MAX_SPARES", "SPARE_DIR", "SparePool", "close_all", "pool_for"]
