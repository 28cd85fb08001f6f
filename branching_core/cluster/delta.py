"""What a candidate changed, as data: collected on the node, applied by the driver.

A ``Delta`` holds only what differs from the snapshot the candidate started from:
deleted paths, created or re-moded directories, created or modified files (content
and mode) and symlinks (target). A rename arrives as a delete plus a create. It
never carries the tree, so what a task sends back is about the size of what it
changed.

``apply`` lands a delta in the real workspace the same way a local branch lands:
it makes a local branch of the parent, checks every path the delta touches
against the snapshot (changed in the parent since the snapshot *and* by the
candidate: ``ConflictError``, nothing applied), writes the delta into the branch
and commits it through the journaled commit, so a crash mid-way rolls forward or
leaves the workspace as it was.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branching_core.cluster.snapshot import EXCLUDED_TOP, Entry, Manifest, entry_for, scan
from branching_core.errors import ConflictError


@dataclass
class Delta:
    deleted: list[str] = field(default_factory=list)
    dirs: dict[str, int] = field(default_factory=dict)
    files: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    symlinks: dict[str, str] = field(default_factory=dict)

    def paths(self) -> list[str]:
        return sorted({*self.deleted, *self.dirs, *self.files, *self.symlinks})

    @property
    def content_bytes(self) -> int:
        return sum(len(data) for _, data in self.files.values())

    def __bool__(self) -> bool:
        return bool(self.deleted or self.dirs or self.files or self.symlinks)


def _excluded(rel: str) -> bool:
    return rel.split("/", 1)[0] in EXCLUDED_TOP


def collect(branch: Any, base: Path) -> Delta:
    """The delta of an open branch of ``base`` (the node's materialised snapshot).

    The backend says which paths it saw change (cheap: an overlay's upper layer);
    each is then compared with the same path in ``base``, so a file touched but left
    equal is not shipped, and the node never needs the whole manifest.
    """
    changes = branch.changes()
    root = Path(branch.path)
    delta = Delta()
    for rel in sorted({*changes.created, *changes.modified}):
        if _excluded(rel):
            continue
        now = entry_for(root / rel)
        before = entry_for(base / rel)
        if now is None or now == before:
            continue
        if now[0] == "d":
            delta.dirs[rel] = now[1]
        elif now[0] == "l":
            delta.symlinks[rel] = now[1]
        elif now[0] == "f":
            delta.files[rel] = (now[1], (root / rel).read_bytes())
        if before is not None and before[0] != now[0]:
            delta.deleted.append(rel)  # a type change: the old entry goes first
    for rel in changes.deleted:
        gone = entry_for(root / rel) is None
        if not _excluded(rel) and gone and entry_for(base / rel) is not None:
            delta.deleted.append(rel)
    delta.deleted.sort()
    return delta


def conflicts(parent_root: Path, delta: Delta, manifest: Manifest) -> list[str]:
    """Paths the delta touches whose state in ``parent_root`` is not the snapshot's."""
    found: list[str] = []
    for rel in delta.paths():
        expected: Entry | None = manifest.get(rel)
        now = entry_for(parent_root / rel)
        if _norm(now) != _norm(expected):
            found.append(rel)
        elif rel in delta.deleted and expected is not None and expected[0] == "d":
            # deleting a directory: nothing inside it may have changed either
            prefix = f"{rel}/"
            before = {k: v for k, v in manifest.items() if k.startswith(prefix)}
            after = {f"{prefix}{k}": v for k, v in scan(parent_root / rel).items()}
            found.extend(sorted(k for k in before.keys() | after.keys()
                                if _norm(before.get(k)) != _norm(after.get(k))))
    return sorted(set(found))


def _norm(entry: Entry | None) -> tuple[Any, ...] | None:
    return None if entry is None else tuple(entry)


def write_into(root: Path, delta: Delta) -> None:
    """Make ``root`` (a branch view of the parent) hold the delta's changes."""
    for rel in delta.deleted:
        _remove(root / rel)
    for rel in sorted(delta.dirs, key=lambda r: r.count("/")):
        path = root / rel
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            _remove(path)
        path.mkdir(mode=0o700, exist_ok=True)
    for rel, target in delta.symlinks.items():
        path = root / rel
        _remove(path)
        os.symlink(target, path)
    for rel, (mode, data) in delta.files.items():
        path = root / rel
        if path.is_symlink() or path.is_dir():
            _remove(path)
        tmp = path.with_name(f".{path.name}.forkdeck-delta")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    for rel in sorted(delta.dirs, key=lambda r: -r.count("/")):
        os.chmod(root / rel, delta.dirs[rel])


def _remove(path: Path) -> None:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def apply(parent: Any, delta: Delta, manifest: Manifest, name: str) -> None:
    """Commit ``delta`` into ``parent`` (workspace or open branch), all or nothing."""
    branch = parent.branch(name, on_success=None, on_error=None)
    try:
        found = conflicts(Path(parent.path), delta, manifest)
        if found:
            shown = ", ".join(found[:5]) + (" ..." if len(found) > 5 else "")
            raise ConflictError(
                f"{len(found)} path(s) changed in {parent.path} since the snapshot the "
                f"candidate ran on: {shown}; nothing applied",
                found,
            )
        write_into(Path(branch.path), delta)
        branch.commit()
    finally:
        if branch.is_open:
            branch.abort()


__all__ = ["Delta", "apply", "collect", "conflicts", "write_into"]
