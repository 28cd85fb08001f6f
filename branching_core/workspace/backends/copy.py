"""Portable branches: the view is a real copy of the parent, diffed against a manifest.

Slow to create on big trees, but it works on any filesystem and any kernel, and every
semantic of the overlay backend is tested against it too. The manifest records what
each entry looked like right after copying (type, mode, size, mtime, inode); a file
whose mtime falls in the last moments before the copy also gets a content hash, so a
same-size rewrite within one timestamp tick is still seen as a change.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

from branching_core.workspace.backends.base import Backend, BranchLayout, ParentView
from branching_core.workspace.changes import Op
from branching_core.workspace.fsutil import (
    PROJECT_STATE_DIR,
    lstat_or_none,
    read_json,
    rmtree,
    write_json_atomic,
)

RACY_WINDOW_NS = 50_000_000  # files touched this close to the copy are hashed
Entry = list[object]  # [kind, mode, size, mtime_ns, ino, digest-or-None]


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    return "f"


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
        store_dir = self.store_root / branch_id
        view = store_dir / "view"
        store_dir.mkdir(parents=True)
        started_ns = time.time_ns()
        shutil.copytree(
            parent.root,
            view,
            symlinks=True,
            ignore=_ignore_state_dir(parent.root),
            copy_function=self.copy_file,
        )
        manifest = _build_manifest(view, started_ns)
        write_json_atomic(store_dir / "manifest.json", manifest)
        return BranchLayout(
            branch_id=branch_id,
            store_dir=store_dir,
            view=view,
            layers=[view],
            extra={"manifest": manifest},
        )

    def collect(self, layout: BranchLayout, parent: ParentView) -> list[Op]:
        cached = layout.extra.get("manifest")
        manifest: dict[str, Entry] = (
            cached if isinstance(cached, dict) and cached
            else read_json(layout.store_dir / "manifest.json")
        )
        assert layout.view is not None
        ops: list[Op] = []
        seen: set[str] = set()
        self._collect_dir(layout.view, "", manifest, parent.root, ops, seen)
        deleted_dirs: list[str] = []
        for rel in sorted(manifest):
            if rel in seen or any(rel.startswith(d + "/") for d in deleted_dirs):
                continue
            if lstat_or_none(parent.root / rel) is not None:
                ops.append(Op("delete", rel))
            if manifest[rel][0] == "d":
                deleted_dirs.append(rel)
        return ops

    def _collect_dir(
        self,
        view_dir: Path,
        rel_dir: str,
        manifest: dict[str, Entry],
        parent_root: Path,
        ops: list[Op],
        seen: set[str],
    ) -> None:
        for entry in os.scandir(view_dir):
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if not rel_dir and entry.name == PROJECT_STATE_DIR:
                continue
            st = entry.stat(follow_symlinks=False)
            kind = _kind(st.st_mode)
            old = manifest.get(rel)
            source = Path(entry.path)
            if old is not None and old[0] == kind:
                seen.add(rel)
                if kind == "d":
                    if stat.S_IMODE(st.st_mode) != old[1]:
                        ops.append(Op("chmod", rel, mode=stat.S_IMODE(st.st_mode)))
                    self._collect_dir(source, rel, manifest, parent_root, ops, seen)
                elif _changed(source, st, old):
                    ops.append(Op("put", rel, source=str(source), existed=True))
                continue
            # new entry, or the type changed (file <-> dir <-> symlink)
            parent_st = lstat_or_none(parent_root / rel)
            if old is not None:
                seen.add(rel)
                _mark_subtree_seen(rel, manifest, seen)
            if parent_st is not None and (
                kind == "d" or stat.S_ISDIR(parent_st.st_mode) or old is not None
            ):
                ops.append(Op("delete", rel))
            ops.append(
                Op("put", rel, source=str(source), tree=kind == "d", existed=old is not None)
            )

    def destroy(self, layout: BranchLayout) -> None:
        rmtree(layout.store_dir)

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


def _ignore_state_dir(root: Path) -> Callable[[str, list[str]], list[str]]:
    root_str = str(root)

    def ignore(directory: str, names: list[str]) -> list[str]:
        return [PROJECT_STATE_DIR] if directory == root_str and PROJECT_STATE_DIR in names else []

    return ignore


def _build_manifest(view: Path, started_ns: int) -> dict[str, Entry]:
    manifest: dict[str, Entry] = {}
    for dirpath, dirnames, filenames in os.walk(view):
        rel_dir = os.path.relpath(dirpath, view)
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            digest = None
            if stat.S_ISREG(st.st_mode) and st.st_mtime_ns >= started_ns - RACY_WINDOW_NS:
                digest = _digest(Path(full))
            manifest[rel] = [
                _kind(st.st_mode),
                stat.S_IMODE(st.st_mode),
                st.st_size,
                st.st_mtime_ns,
                st.st_ino,
                digest,
            ]
    return manifest


def _changed(path: Path, st: os.stat_result, old: Entry) -> bool:
    _, mode, size, mtime_ns, ino, digest = old
    if (stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino) != (
        mode,
        size,
        mtime_ns,
        ino,
    ):
        return True
    if stat.S_ISLNK(st.st_mode):
        return False
    return digest is not None and _digest(path) != digest


def _mark_subtree_seen(rel: str, manifest: dict[str, Entry], seen: set[str]) -> None:
    prefix = rel + "/"
    seen.update(key for key in manifest if key.startswith(prefix))
