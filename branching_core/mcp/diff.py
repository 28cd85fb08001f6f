"""A branch's changes as a model reads them: classified paths and a bounded unified diff.

The engine reports created, modified and deleted paths (``Branch.changes``); a rename is
a deletion and a creation with the same bytes, which is recognised here so a model sees
``renamed`` rather than two unrelated changes. The diff compares the parent's view
(the workspace, or the parent branch's directory) with the branch's directory.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from branching_core.mcp.bounds import MAX_DIFF_CHARS, MAX_FILE_BYTES, MAX_LISTED_PATHS
from branching_core.mcp.results import ChangedPath, DiffResult


def _read(path: Path) -> bytes | None:
    try:
        if path.is_symlink():
            return f"symlink -> {path.readlink()}".encode()
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _classify(changes: Any, parent_root: Path, branch_root: Path) -> list[ChangedPath]:
    created = list(changes.created)
    deleted = list(changes.deleted)
    renamed: list[ChangedPath] = []
    gone: dict[bytes, str] = {}
    for old in deleted:
        data = _read(parent_root / old)
        if data:  # empty files match anything: never call those a rename
            gone.setdefault(data, old)
    for new in list(created):
        data = _read(branch_root / new)
        old = gone.pop(data, None) if data else None
        if old is not None:
            created.remove(new)
            deleted.remove(old)
            renamed.append(ChangedPath(path=new, status="renamed", old_path=old))
    out = [
        *(ChangedPath(path=p, status="created") for p in created),
        *(ChangedPath(path=p, status="modified") for p in changes.modified),
        *(ChangedPath(path=p, status="deleted") for p in deleted),
        *renamed,
    ]
    return sorted(out, key=lambda c: c.path)


def _lines(data: bytes | None) -> list[str] | None:
    if data is None:
        return None
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def _file_diff(change: ChangedPath, parent_root: Path, branch_root: Path) -> str:
    old_rel = change.old_path or change.path
    old = None if change.status == "created" else _read(parent_root / old_rel)
    new = None if change.status == "deleted" else _read(branch_root / change.path)
    a = f"a/{old_rel}" if change.status != "created" else "/dev/null"
    b = f"b/{change.path}" if change.status != "deleted" else "/dev/null"
    old_lines = [] if change.status == "created" else _lines(old)
    new_lines = [] if change.status == "deleted" else _lines(new)
    if old_lines is None or new_lines is None:
        return f"Binary or large files {a} and {b} differ\n"
    body = "".join(difflib.unified_diff(old_lines, new_lines, a, b))
    if body and not body.endswith("\n"):
        body += "\n\\ No newline at end of file\n"
    if not body and change.status == "renamed":
        body = f"rename from {old_rel}\nrename to {change.path}\n"
    return body


def _selected(path: str, wanted: list[str] | None) -> bool:
    if wanted is None or "" in wanted:
        return True
    return any(path == w or path.startswith(w + "/") for w in wanted)


def diff_branch(
    label: str, branch: Any, parent_root: Path, wanted: list[str] | None = None
) -> DiffResult:
    """The branch's changes (filtered to ``wanted`` paths or directories), bounded."""
    branch_root = Path(branch.path)
    changes = [
        c for c in _classify(branch.changes(), parent_root, branch_root)
        if _selected(c.path, wanted) or (c.old_path is not None and _selected(c.old_path, wanted))
    ]
    notes: list[str] = []
    listed = changes[:MAX_LISTED_PATHS]
    if len(changes) > len(listed):
        notes.append(f"{len(changes) - len(listed)} more changed paths not listed")
    parts: list[str] = []
    size = 0
    truncated = False
    for i, change in enumerate(listed):
        text = _file_diff(change, parent_root, branch_root)
        if size + len(text) > MAX_DIFF_CHARS:
            truncated = True
            notes.append(
                f"diff cut at {MAX_DIFF_CHARS} characters: {len(listed) - i} of "
                f"{len(listed)} files not shown; pass paths=[...] to see them"
            )
            break
        parts.append(text)
        size += len(text)
    return DiffResult(
        label=label,
        changes=listed,
        diff="".join(parts),
        truncated=truncated or len(changes) > len(listed),
        note="; ".join(notes),
    )


__all__ = ["diff_branch"]
