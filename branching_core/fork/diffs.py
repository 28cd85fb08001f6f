"""A small cross-branch diff for the ``diff_branches`` tool.

Deliberately minimal: ``Branch.changes()`` (which sees tool writes *and* shell commands,
because it reads the copy-on-write view) plus stdlib unified diffs. The full review module
(``build_diff_report``, judge) lives in ``branching_core.review``.
"""

from __future__ import annotations

import difflib
import hashlib
from pathlib import Path
from typing import Any

MAX_DIFF_LINES = 400
SNIFF = 8192


def _read(path: Path) -> bytes | None:
    try:
        if path.is_file():
            return path.read_bytes()
    except OSError:
        pass
    return None


def _placeholder(data: bytes) -> str:
    return f"[binary · {len(data)} bytes · sha256:{hashlib.sha256(data).hexdigest()[:12]}]"


def unified_diff(
    path: str, old: bytes | None, new: bytes | None, *, max_lines: int = MAX_DIFF_LINES
) -> str:
    """Unified diff of one path; binaries get a placeholder, long diffs keep head and tail."""
    for blob in (old, new):
        if blob is not None and b"\x00" in blob[:SNIFF]:
            return f"{_placeholder(old or b'')} -> {_placeholder(new or b'')}"
    a = (old or b"").decode("utf-8", "replace").splitlines(keepends=True)
    b = (new or b"").decode("utf-8", "replace").splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(
            a,
            b,
            fromfile="/dev/null" if old is None else f"a/{path}",
            tofile="/dev/null" if new is None else f"b/{path}",
        )
    )
    if len(lines) > max_lines:
        half = max_lines // 2
        cut = len(lines) - 2 * half
        lines = [*lines[:half], f"... [{cut} lines truncated] ...\n", *lines[-half:]]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def diff_report(
    fork_id: str,
    parent_dir: Path,
    branches: list[tuple[str, str, Path, Any]],
    *,
    paths: list[str] | None = None,
) -> dict[str, Any]:
    """Compare branches against their parent directory.

    ``branches`` holds ``(branch_id, label, branch_dir, BranchChanges)``. Each touched path
    gets its per-branch operation, unified diff and an ``agreement`` label: ``unique`` (one
    branch touched it), ``unanimous_change`` (several, identical result), ``split``
    (several, different results), ``unanimous_no_change`` (asked for, touched by none).
    """
    per_path: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, bytes | None]] = {}
    for branch_id, label, branch_dir, changes in branches:
        ops = {p: "created" for p in changes.created}
        ops.update({p: "modified" for p in changes.modified})
        ops.update({p: "deleted" for p in changes.deleted})
        for rel, op in ops.items():
            if paths is not None and rel not in paths:
                continue
            if (branch_dir / rel).is_dir() and op != "deleted":
                continue
            new = None if op == "deleted" else _read(branch_dir / rel)
            old = _read(parent_dir / rel)
            per_path.setdefault(rel, {})[branch_id] = {
                "label": label,
                "operation": op,
                "diff": unified_diff(rel, old, new),
            }
            results.setdefault(rel, {})[branch_id] = new
    for rel in paths or []:
        per_path.setdefault(rel, {})
    entries = []
    split = 0
    for rel in sorted(per_path):
        touched = results.get(rel, {})
        if not touched:
            agreement = "unanimous_no_change"
        elif len(touched) == 1:
            agreement = "unique"
        elif len({v for v in touched.values()}) == 1:
            agreement = "unanimous_change"
        else:
            agreement = "split"
            split += 1
        entries.append({"path": rel, "agreement": agreement, "branches": per_path[rel]})
    total = sum(1 for e in entries if e["branches"])
    return {
        "fork_id": fork_id,
        "paths": entries,
        "summary": {
            "total_paths_touched": total,
            "split_paths": split,
            "agreement_score": 1.0 - split / max(total, 1),
        },
    }


__all__ = ["diff_report", "unified_diff"]
