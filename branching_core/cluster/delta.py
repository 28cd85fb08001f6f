"""What a candidate changed, as data: collected on the node, applied by the driver.

A ``Delta`` holds only what differs from the snapshot the candidate started from:
deleted paths, created or re-moded directories, created or modified files (content
and mode) and symlinks (target). A rename arrives as a delete plus a create. It
never carries the tree, so what a task sends back is about the size of what it
changed.

A node is untrusted: what it sends is checked before anything is looked up with it
(:func:`vet`: every key of every part, whatever its type, is a plain relative path
outside forkdeck's state, no path goes through a symlink of the root or one the delta
itself makes, modes are permission bits, link targets and sizes are bounded); a bad
delta raises ``UnsafeChangeError`` and nothing is applied.

``apply`` lands a delta in the real workspace through the one landing function
(``workspace.land.land_files``: the landing rule, setuid/setgid/capabilities stripped,
one journaled commit, so a crash mid-way rolls forward or leaves the workspace as it
was) with its one conflict rule, the one every landing has: a path the delta touches
that the parent changed after the snapshot's scan began, or that the snapshot held and
the parent no longer does, is a ``ConflictError`` and nothing is applied. ``write_into``
(a remote fork branch's local view) writes with the ``workspace.beneath`` operations,
which never follow a link below the view.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branching_core.cluster.snapshot import Snapshot, entry_for
from branching_core.errors import UnsafeChangeError
from branching_core.workspace import beneath
from branching_core.workspace.guard import PRIVILEGE_BITS, linked_steps, refuse
from branching_core.workspace.land import NewFile, land_files
from branching_core.workspace.paths import MAX_PATH_BYTES, is_internal_path, path_problem

MAX_ENTRIES = 1_000_000
"""Paths one delta may touch."""
MAX_BYTES = 8 << 30
"""File content one delta may carry (8 GiB), in total."""


@dataclass
class Delta:
    deleted: list[str] = field(default_factory=list[str])
    dirs: dict[str, int] = field(default_factory=dict[str, int])
    files: dict[str, tuple[int, bytes]] = field(default_factory=dict[str, tuple[int, bytes]])
    symlinks: dict[str, str] = field(default_factory=dict[str, str])

    def paths(self) -> list[str]:
        return sorted({*self.deleted, *self.dirs, *self.files, *self.symlinks})

    @property
    def content_bytes(self) -> int:
        return sum(len(data) for _, data in self.files.values())

    def __bool__(self) -> bool:
        return bool(self.deleted or self.dirs or self.files or self.symlinks)


def _excluded(rel: str) -> bool:
    return is_internal_path(rel)


def vet(delta: Any, root: Path, what: str = "a node's delta") -> Delta:
    """``delta`` as received (from an untrusted node), checked whole: returns it when
    every part is well formed (module doc), else raises ``UnsafeChangeError`` naming
    each bad path. ``root`` is where it would be written (its links are not followed)."""
    if not isinstance(delta, Delta):
        raise UnsafeChangeError(f"refused to land {what}: not a Delta ({type(delta).__name__})")
    parts = (delta.deleted, delta.dirs, delta.files, delta.symlinks)
    kinds = (list, dict, dict, dict)
    # A node is untrusted and unpickling checks no annotation: every isinstance below is
    # the check the declared types cannot make (so the checker calls them unnecessary).
    if not all(isinstance(p, k) for p, k in zip(parts, kinds, strict=True)):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UnsafeChangeError(f"refused to land {what}: malformed delta")
    problems: list[tuple[str, str]] = []
    total = sum(len(p) for p in parts)
    if total > MAX_ENTRIES:
        raise UnsafeChangeError(f"refused to land {what}: {total} paths (at most {MAX_ENTRIES})")
    for rel in [*delta.deleted, *delta.dirs, *delta.files, *delta.symlinks]:
        reason = path_problem(rel)
        if reason is not None:
            problems.append((str(rel), reason))
    for rel, mode in delta.dirs.items():
        if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o7777:  # pyright: ignore[reportUnnecessaryIsInstance]
            problems.append((str(rel), f"{rel!r}: directory mode {mode!r} is not permission bits"))
    size = 0
    for rel, value in delta.files.items():
        ok = isinstance(value, tuple) and len(value) == 2  # pyright: ignore[reportUnnecessaryIsInstance]
        mode, data = value if ok else (None, None)
        if not (isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode <= 0o7777):
            problems.append((str(rel), f"{rel!r}: file mode {mode!r} is not permission bits"))
        if not isinstance(data, bytes):
            problems.append((str(rel), f"{rel!r}: file content is not bytes"))
        else:
            size += len(data)
    if size > MAX_BYTES:
        problems.append(("*", f"{size} bytes of content (at most {MAX_BYTES})"))
    for rel, target in delta.symlinks.items():
        if not isinstance(target, str) or not target or "\0" in target:  # pyright: ignore[reportUnnecessaryIsInstance]
            problems.append((str(rel), f"{rel!r}: symlink target {target!r} is not a path"))
        elif len(target.encode("utf-8", "surrogateescape")) >= MAX_PATH_BYTES:
            problems.append((str(rel), f"{rel!r}: symlink target longer than {MAX_PATH_BYTES}"))
    if problems:
        raise refuse(problems, what)
    # in the order write_into and the commit apply them: deletes, dirs, links, files
    steps = [
        *((rel, None) for rel in sorted(delta.deleted)),
        *((rel, "d") for rel in sorted(delta.dirs, key=lambda r: r.count("/"))),
        *((rel, "l") for rel in sorted(delta.symlinks)),
        *((rel, "f") for rel in sorted(delta.files)),
    ]
    problems = linked_steps(steps, root)
    if problems:
        raise refuse(problems, what)
    return delta


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


def write_into(root: Path, delta: Delta) -> None:
    """Make ``root`` (a local branch view of the parent) hold the delta's changes.

    Checked whole first (:func:`vet`), then written with ``workspace.beneath``, which
    never follows a link below ``root``; file modes lose setuid/setgid."""
    vet(delta, root)
    for rel in delta.deleted:
        beneath.remove(root, rel)
    for rel in sorted(delta.dirs, key=lambda r: r.count("/")):
        st = beneath.lstat(root, rel)
        if st is None or not stat.S_ISDIR(st.st_mode):
            beneath.mkdir(root, rel, 0o700)
    for rel, target in delta.symlinks.items():
        st = beneath.lstat(root, rel)
        if st is not None and stat.S_ISDIR(st.st_mode):
            beneath.remove(root, rel)
        beneath.symlink(root, rel, target)
    for rel, (mode, data) in delta.files.items():
        st = beneath.lstat(root, rel)
        if st is not None and stat.S_ISDIR(st.st_mode):
            beneath.remove(root, rel)
        beneath.write_file(
            root, rel, data, mode=mode & ~PRIVILEGE_BITS, tmp_prefix=".forkdeck-delta-"
        )
    for rel in sorted(delta.dirs, key=lambda r: -r.count("/")):
        beneath.mkdir(root, rel, delta.dirs[rel] & ~stat.S_ISUID)


def apply(parent: Any, delta: Any, snapshot: Snapshot, name: str) -> None:
    """Commit ``delta`` into ``parent`` (workspace or open branch), all or nothing:
    ``UnsafeChangeError`` for a malformed or hostile delta, ``ConflictError`` for a path
    the parent changed since ``snapshot`` was taken; nothing applied either way.

    Through the one landing function with the one conflict rule of every landing
    (``workspace.land.land_files``: changed in the parent after ``since_ns``, here when
    the snapshot's scan began; or held by the snapshot and gone from the parent now)."""
    delta = vet(delta, Path(parent.path))
    files: dict[str, NewFile | None] = {rel: None for rel in delta.deleted}
    files.update({rel: NewFile(link=target) for rel, target in delta.symlinks.items()})
    files.update({rel: NewFile(data=data, mode=mode) for rel, (mode, data) in delta.files.items()})
    for rel in delta.dirs:  # a file turned into a directory: land_files replaces it
        files.pop(rel, None)
    land_files(
        parent,
        files,
        dirs=delta.dirs,
        since_ns=snapshot.taken_ns,
        existed=snapshot.manifest.keys(),
        label=name,
    )


__all__ = [
    "MAX_BYTES",
    "MAX_ENTRIES",
    "Delta",
    "apply",
    "collect",
    "vet",
    "write_into",
]
