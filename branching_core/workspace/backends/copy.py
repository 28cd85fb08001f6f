"""Portable branches: the view is a real copy of the parent, diffed against a manifest.

Slow to create on big trees, but it works on any filesystem and any kernel, and every
semantic of the overlay backend is tested against it too. The manifest records what
each entry looked like right after copying (type, mode, size, mtime, inode); a file
whose mtime falls in the last moments before the copy also gets a content hash, so a
same-size rewrite within one timestamp tick is still seen as a change.

Listing the view (at creation and at every ``collect``) and removing it are the parts
whose cost grows with the tree; both go through ``workspace.treescan``, which does the
per-entry syscalls in a child process, so a commit running in a worker thread does not
starve the event loop's thread of the GIL (see that module). The diff compares the
listing with the one taken at creation as two sets of records (in C); only the records
that differ, and the few hashed files, are looked at in Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeGuard

from branching_core.workspace.backends.base import (
    META_NAME,
    Backend,
    BranchLayout,
    ParentView,
    meta_text,
    write_new_file,
)
from branching_core.workspace.changes import Op
from branching_core.workspace.fsutil import (
    PROJECT_STATE_DIR,
    lstat_or_none,
    read_json,
    rmtree,
)
from branching_core.workspace.reaper import discard_dirs
from branching_core.workspace.treescan import (
    Stat,
    list_tree,
    parse_records,
    record_of,
)

RACY_WINDOW_NS = 50_000_000  # files touched this close to the copy are hashed
# A copy of at most this many entries is listed in this process (see create_many)
SMALL_TREE_ENTRIES = 256
Entry = list[object]  # [kind, mode, size, mtime_ns, ino, digest-or-None]


def _is_manifest(value: object) -> TypeGuard[dict[str, Entry]]:
    """``layout.extra["manifest"]``: set by ``create_many`` (absent once reopened)."""
    return isinstance(value, dict)


def _is_listing(value: object) -> TypeGuard[frozenset[bytes]]:
    """``layout.extra["listing"]``: the ``list_tree`` records the manifest describes."""
    return isinstance(value, frozenset)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class CopyBackend(Backend):
    name = "copy"

    @classmethod
    def probe(cls, workspace: Path, store_root: Path) -> str | None:
        try:
            store_root.mkdir(parents=True, exist_ok=True)
            probe = store_root / f".probe-copy-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            return f"branch store is not writable: {exc}"
        return None

    def copy_file(self, source: str, target: str) -> None:
        shutil.copy2(source, target, follow_symlinks=False)

    def create(self, branch_id: str, parent: ParentView) -> BranchLayout:
        return self.create_many([branch_id], parent)[0]

    def create_many(
        self,
        branch_ids: list[str],
        parent: ParentView,
        metas: list[dict[str, object]] | None = None,
        *,
        durable: bool = True,
    ) -> list[BranchLayout]:
        """Copy the parent once per branch; list each copy in this process when the tree
        is small (a ``find`` child costs a fork+exec, 2-4 ms, more than listing a few
        hundred entries here). The manifest goes to disk only for durable branches
        (reopening reads it); an ordinary one keeps it in memory, as a crash discards
        the branch anyway. Every file is written once, as a new file."""
        layouts: list[BranchLayout] = []
        try:
            for i, branch_id in enumerate(branch_ids):
                layouts.append(self._create_one(branch_id, parent, durable))
                if metas is not None:
                    write_new_file(layouts[-1].store_dir / META_NAME, meta_text(metas[i]))
        except BaseException:
            for layout in layouts:
                rmtree(layout.store_dir)
            raise
        return layouts

    def _create_one(self, branch_id: str, parent: ParentView, durable: bool) -> BranchLayout:
        store_dir = self.store_root / branch_id
        view = store_dir / "view"
        os.mkdir(store_dir)
        try:
            started_ns = time.time_ns()
            entries = _copy_tree(parent.root, view, self.copy_file)
            listing = list_tree(view, external=entries > SMALL_TREE_ENTRIES)
            manifest = _build_manifest(view, listing, started_ns)
            if durable:
                write_new_file(store_dir / "manifest.json", json.dumps(manifest, sort_keys=True))
        except BaseException:
            rmtree(store_dir)
            raise
        return BranchLayout(
            branch_id=branch_id,
            store_dir=store_dir,
            view=view,
            layers=[view],
            extra={"manifest": manifest, "listing": listing},
        )

    def collect(self, layout: BranchLayout, parent: ParentView) -> list[Op]:
        cached = layout.extra.get("manifest")
        manifest: dict[str, Entry] = (
            cached  # in memory; on disk only for durable branches (see create_many)
            if _is_manifest(cached)
            else read_json(layout.store_dir / "manifest.json")
        )
        assert layout.view is not None
        before = layout.extra.get("listing")
        if not _is_listing(before):
            # reopened: the listing the manifest describes (a fifo or device is listed
            # under its own type, so it is merely looked at again below)
            before = frozenset(record_of(rel, _as_stat(e)) for rel, e in manifest.items())
            layout.extra["listing"] = before
        now = list_tree(layout.view)
        return _diff(
            str(layout.view),
            parse_records(now - before),
            parse_records(before - now),
            manifest,
            parent.root,
        )

    def destroy(self, layout: BranchLayout) -> None:
        self.destroy_many([layout])

    def destroy_many(self, layouts: list[BranchLayout]) -> None:
        # the branches are gone at once, their copies removed in the background (one job)
        trash = self.store_root / "trash"
        discard_dirs([(layout.store_dir, trash / layout.store_dir.name) for layout in layouts])

    def reopen(self, branch_id: str, parent: ParentView) -> BranchLayout:
        store_dir = self.store_root / branch_id
        manifest = read_json(store_dir / "manifest.json")
        view = store_dir / "view"
        return BranchLayout(
            branch_id=branch_id,
            store_dir=store_dir,
            view=view,
            layers=[view],
            extra={"manifest": manifest},
        )


def _copy_tree(source: Path, target: Path, copy_file: Callable[[str, str], None]) -> int:
    """Copy ``source`` (without its top-level ``.pydantic-deep``) to the new ``target``;
    returns how many entries were copied (to choose how to list the copy)."""
    root_str = str(source)
    count = 0

    def ignore(directory: str, names: list[str]) -> list[str]:
        nonlocal count
        count += len(names)
        return [PROJECT_STATE_DIR] if directory == root_str and PROJECT_STATE_DIR in names else []

    shutil.copytree(source, target, symlinks=True, ignore=ignore, copy_function=copy_file)
    return count


def _build_manifest(view: Path, listing: frozenset[bytes], started_ns: int) -> dict[str, Entry]:
    manifest: dict[str, Entry] = {}
    for rel, (kind, mode, size, mtime_ns, ino) in parse_records(listing).items():
        digest = None
        if kind == "f" and mtime_ns >= started_ns - RACY_WINDOW_NS:
            full = view / rel
            if stat.S_ISREG(os.lstat(full).st_mode):
                digest = _digest(full)
        manifest[rel] = [kind, mode, size, mtime_ns, ino, digest]
    return manifest


def _diff(
    view: str,
    now: dict[str, Stat],
    was: dict[str, Stat],
    manifest: dict[str, Entry],
    parent_root: Path,
) -> list[Op]:
    """The view's changes against its manifest. ``now``: the entries whose listing record
    is new or differs from the one taken at creation; ``was``: the records at creation
    that are no longer listed as they were. Every other entry is unchanged, except a file
    hashed at creation (``_changed``). Parents sort before their children, so one pass
    skips what lies inside a directory that moves into the parent whole."""
    ops: list[Op] = []
    moved_whole: set[str] = set()  # view directories published by one rename
    replaced: set[str] = set()  # manifest paths whose type changed
    # hashed at creation and listed exactly as then: only the content can tell
    hashed = [
        rel for rel, e in manifest.items() if e[5] is not None and rel not in now and rel not in was
    ]
    for rel in sorted({*now, *hashed}):
        kind, mode, size, mtime_ns, ino = now[rel] if rel in now else _as_stat(manifest[rel])
        if rel.rpartition("/")[0] in moved_whole:
            if kind == "d":
                moved_whole.add(rel)
            continue
        old = manifest.get(rel)
        source = os.path.join(view, rel)
        if old is not None and old[0] == kind:
            if kind == "d":
                if mode != old[1]:
                    ops.append(Op("chmod", rel, mode=mode))
            elif _changed(source, kind, (mode, size, mtime_ns, ino), old):
                ops.append(Op("put", rel, source=source, existed=True))
            continue
        # new entry, or the type changed (file <-> dir <-> symlink)
        parent_st = lstat_or_none(parent_root / rel)
        if old is not None:
            replaced.add(rel)
        if parent_st is not None and (
            kind == "d" or stat.S_ISDIR(parent_st.st_mode) or old is not None
        ):
            ops.append(Op("delete", rel))
        ops.append(Op("put", rel, source=source, tree=kind == "d", existed=old is not None))
        if kind == "d":
            moved_whole.add(rel)
    gone: set[str] = set()  # manifest directories removed or replaced: their subtree too
    for rel in sorted(was):
        old = manifest.get(rel)
        if old is None:
            continue
        was_dir = old[0] == "d"
        if rel.rpartition("/")[0] in gone or rel in replaced:
            if was_dir:
                gone.add(rel)
            continue
        entry = now.get(rel)
        if entry is not None and entry[0] == old[0]:
            continue  # still there (compared above)
        if lstat_or_none(parent_root / rel) is not None:
            ops.append(Op("delete", rel))
        if was_dir:
            gone.add(rel)
    return ops


def _as_stat(entry: Entry) -> Stat:
    kind, mode, size, mtime_ns, ino = entry[:5]
    assert isinstance(mode, int) and isinstance(size, int)
    assert isinstance(mtime_ns, int) and isinstance(ino, int)
    return (str(kind), mode, size, mtime_ns, ino)


def _changed(path: str, kind: str, now: tuple[int, int, int, int], old: Entry) -> bool:
    _, mode, size, mtime_ns, ino, digest = old
    if now != (mode, size, mtime_ns, ino):
        return True
    if kind == "l":
        return False
    return digest is not None and _digest(Path(path)) != digest
