"""Diff presentation and diff-tool launching shared by the merge picker and the diff explorer.

Both screens show slices of the same ``BranchDiffReport`` and both open the user's diff tool,
so the colouring rules and the "which directories does the tool compare" decision live here
once. The directories are *inputs* (``DiffPaths``) rather than something the widgets dig out of
a coordinator: the caller knows whether the on-disk fork mirror exists, and tests can point
the widgets at any directories they like.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.text import Text

from branching_core.review import (
    BranchChange,
    BranchDiffReport,
    EditorDetector,
    EditorKind,
    PathDiff,
)

STATE_BADGES: dict[str, str] = {
    "running": "● running",
    "done": "✓ done",
    "failed": "✗ failed",
    "terminated": "⊘ terminated",
    "budget_exhausted": "$ budget",
    "aggregate_budget_exhausted": "$$ budget",
    "awaiting_approval": "⏸ approval",
}

AGREEMENT_STYLES: dict[str, str] = {
    "unanimous_change": "green",
    "unanimous_no_change": "dim",
    "split": "bold yellow",
    "unique": "cyan",
}

OPERATION_MARKS: dict[str, str] = {
    "created": "A",
    "modified": "M",
    "deleted": "D",
    "renamed": "R",
    "untouched": " ",
}
"""git-status letters: unlike ``+``/``-`` they cannot be mistaken for diff lines."""


def state_badge(state: str) -> str:
    """``✓ done`` etc.; unknown states are shown verbatim rather than hidden."""
    return STATE_BADGES.get(state, state)


def format_cost(cost: float | None) -> str:
    """``$0.0123``; ``$?`` when the model has no known price (never a fake zero)."""
    return "$?" if cost is None else f"${cost:.4f}"


def diff_line_style(line: str) -> str:
    """Rich style of one unified-diff line (headers before +/- so ``+++`` is not an add)."""
    if line.startswith(("+++", "---", "rename from ", "rename to ")):
        return "bold"
    if "[binary · " in line and not line.startswith(("+", "-", " ")):
        return "italic magenta"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    if line.startswith("... ["):
        return "italic dim"
    return ""


def colorize_diff(diff: str) -> Text:
    """A unified diff as Rich ``Text`` with +/- colouring; the binary placeholder stays as is."""
    text = Text(no_wrap=True, overflow="ellipsis")
    for index, line in enumerate(diff.splitlines()):
        if index:
            text.append("\n")
        text.append(line, style=diff_line_style(line))
    return text


def change_heading(change: BranchChange) -> str:
    """``M src/app.py`` / ``R new.py (from old.py)``: what the branch did to the path."""
    mark = OPERATION_MARKS.get(change.operation, "?")
    if change.operation == "renamed" and change.old_path:
        return f"{mark} {change.path} (from {change.old_path})"
    return f"{mark} {change.path}"


def diff_head(
    changes: Sequence[BranchChange],
    *,
    lines_per_file: int = 8,
    max_lines: int = 48,
    edited: Collection[str] = (),
) -> Text:
    """The first lines of each changed file's diff, for a picker column.

    The ``---``/``+++`` headers are dropped (the file heading says the same thing in less
    room); each file shows at most ``lines_per_file`` diff lines and the whole head at most
    ``max_lines``, then a ``… N more files`` line, so nine columns stay cheap to render.
    A path in ``edited`` (the user changed it in this branch's mirror) is marked.
    """
    text = Text(no_wrap=True, overflow="ellipsis")
    if not changes:
        text.append("no file changes", style="dim italic")
        return text
    used = 0
    for index, change in enumerate(changes):
        if used >= max_lines:
            text.append(f"\n… {len(changes) - index} more files", style="dim")
            break
        if index:
            text.append("\n\n")
        text.append(change_heading(change), style="bold underline")
        if change.path in edited:
            text.append(f"  {EDITED_BY_YOU}", style=EDITED_STYLE)
        used += 1
        body = [
            ln
            for ln in change.unified_diff_vs_parent.splitlines()
            if not ln.startswith(("+++", "---"))
        ]
        shown = body[: max(0, min(lines_per_file, max_lines - used))]
        for line in shown:
            text.append("\n")
            text.append(line, style=diff_line_style(line))
        used += len(shown)
        if len(body) > len(shown):
            more = len(body) - len(shown)
            text.append(f"\n  … {more} more line{'s' if more != 1 else ''}", style="dim")
            used += 1
    return text


def change_counts(changes: Iterable[BranchChange]) -> str:
    """``3 files: 1A 1M 1D`` (added, modified, deleted, renamed: git-status letters)."""
    counts: dict[str, int] = {}
    total = 0
    for change in changes:
        counts[change.operation] = counts.get(change.operation, 0) + 1
        total += 1
    if not total:
        return "no changes"
    parts = [
        f"{counts[op]}{OPERATION_MARKS[op]}"
        for op in ("created", "modified", "deleted", "renamed")
        if counts.get(op)
    ]
    noun = "file" if total == 1 else "files"
    return f"{total} {noun}: {' '.join(parts)}"


def label_order(report: BranchDiffReport, labels: Iterable[str] = ()) -> list[str]:
    """Branch labels in fork order: the given ones first, then any only the report knows."""
    ordered = list(dict.fromkeys(labels))
    for label in report.labels.values():
        if label not in ordered:
            ordered.append(label)
    return ordered


def branch_id_of(report: BranchDiffReport, label: str) -> str | None:
    for bid, known in report.labels.items():
        if known == label:
            return bid
    return None


EDITED_BY_YOU = "edited by you"
"""Marks a path the user changed in a branch's mirror directory (their IDE; issue 17.2)."""
EDITED_STYLE = "bold magenta"

PLACEHOLDER_DIR = "absent"
"""Under ``.pydantic-deep/forks/<id>/``: empty stand-ins for files missing on one side."""


@dataclass(frozen=True)
class DiffPaths:
    """Where the diff tool finds the parent and each branch (label -> directory).

    ``parent`` may be ``None`` when there is no parent snapshot to show. ``placeholders``
    (set for a fork's mirror) is where :meth:`for_entry` puts an empty stand-in for the side
    where a file does not exist (a file a branch created has no parent version; one it
    deleted has no branch version), so a 2-way or 3-way tool always gets every side.
    """

    parent: Path | None
    branches: Mapping[str, Path] = field(default_factory=dict)
    placeholders: Path | None = None
    user_edited: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """path -> the branches whose mirror copy of it the user edited (issue 17.2)."""

    @classmethod
    def for_fork(
        cls,
        workspace_root: Path | str,
        fork_id: str,
        branch_paths: Mapping[str, Path | str | None],
    ) -> DiffPaths:
        """Prefer the materialised mirror ``.pydantic-deep/forks/<id>/{parent,branches/<label>}``
        (a stable tree an IDE can keep open); fall back to the workspace root and each
        branch's own view when the mirror is absent."""
        root = Path(workspace_root)
        mirror = root / ".pydantic-deep" / "forks" / fork_id
        has_mirror = (mirror / "parent").is_dir()
        parent = mirror / "parent" if has_mirror else root
        dirnames = _mirror_dirnames(mirror)
        branches: dict[str, Path] = {}
        for label, path in branch_paths.items():
            mirrored = mirror / "branches" / dirnames.get(label, label)
            if mirrored.is_dir():
                branches[label] = mirrored
            elif path is not None:
                branches[label] = Path(path)
        return cls(
            parent=parent,
            branches=branches,
            placeholders=mirror / PLACEHOLDER_DIR if has_mirror else None,
        )

    @classmethod
    def for_coordinator(cls, coordinator: Any) -> DiffPaths:
        """The directories of a live ``ForkCoordinator``'s fork, through its public API.

        With a running mirror (``materialize=True``): the mirror's ``parent/`` and each
        branch's mirror directory (brought up to date first, so the tool sees the latest
        writes). Otherwise ``.pydantic-deep/forks/<id>/`` is looked at on disk (a mirror a
        previous session left), then the parent view and each branch's own view.
        """
        hook = getattr(coordinator, "mirror_hook", None)
        mat = getattr(hook, "materializer", None) if hook is not None else None
        if mat is not None and mat.fork_id == coordinator.fork_id:
            with contextlib.suppress(OSError, KeyError):
                mat.flush()
            return cls(
                parent=Path(mat.parent_dir),
                branches={label: Path(mat.branch_dir(label)) for label in mat.labels},
                placeholders=Path(mat.fork_dir) / PLACEHOLDER_DIR,
                user_edited=edited_by_you(coordinator),
            )
        fallback = cls.for_fork(
            coordinator.workspace.path,
            coordinator.fork_id or "",
            {rt.label: rt.path for rt in coordinator.branches.values()},
        )
        if fallback.parent == Path(coordinator.workspace.path):
            return cls(parent=Path(coordinator.parent_path), branches=fallback.branches)
        return fallback

    def for_entry(self, entry: PathDiff, labels: Sequence[str]) -> tuple[Path | None, list[Path]]:
        """The parent file and the branch files of one report path, for ``labels`` that
        touched it.

        With ``placeholders`` set, a side where the file does not exist (no parent version
        for a file the fork created, no branch version for a file a branch deleted) gets an
        empty file of the same name under ``placeholders/<side>/`` instead of being left out
        or pointing nowhere; without it, a created file has no parent path (old behaviour).
        """
        parent: Path | None = None
        branches: list[Path] = []
        old_path = entry.path
        for label in labels:
            change = entry.by_label(label)
            base = self.branches.get(label)
            if change is None or not change.touched or base is None:
                continue
            if change.operation == "renamed" and change.old_path:
                old_path = change.old_path
            target = base / change.path
            if change.operation == "deleted" or not os.path.lexists(target):
                target = self._placeholder(f"branch-{label}", change.path, fallback=target)
            branches.append(target)
        if self.parent is not None:
            if entry.parent_exists or old_path != entry.path:
                parent = self.parent / old_path
                if not os.path.lexists(parent):
                    parent = self._placeholder("parent", old_path, fallback=parent)
            elif self.placeholders is not None:
                parent = self._placeholder("parent", entry.path, fallback=None)
        return parent, branches

    def _placeholder(self, side: str, rel: str, *, fallback: Any) -> Any:
        """An empty file ``placeholders/<side>/<rel>`` (made once), or ``fallback`` without
        a placeholder directory or when it cannot be made."""
        if self.placeholders is None:
            return fallback
        target = self.placeholders / side / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.write_bytes(b"")
        except OSError:
            return fallback
        return target


def edited_by_you(coordinator: Any) -> dict[str, tuple[str, ...]]:
    """path -> labels of the branches the user edited that path in (their mirror copy)."""
    edits: dict[str, list[str]] = (
        coordinator.user_edits() if hasattr(coordinator, "user_edits") else {}
    )
    by_path: dict[str, list[str]] = {}
    for label, paths in edits.items():
        for path in paths:
            by_path.setdefault(path, []).append(label)
    return {path: tuple(labels) for path, labels in by_path.items()}


def _mirror_dirnames(mirror: Path) -> dict[str, str]:
    """label -> directory under ``branches/``, from the mirror's ``mirror.json`` (a label
    with unsafe characters gets a sanitised directory name); empty when unreadable."""
    try:
        info = json.loads((mirror / "mirror.json").read_text(encoding="utf-8"))
        return {str(b["label"]): str(b["dir"]) for b in info.get("branches", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


@dataclass
class LaunchOutcome:
    """What pressing ``o`` did: ``kind`` detected, processes started (none for ``tui``)."""

    kind: EditorKind
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def wants_tui(self) -> bool:
        return self.kind == "tui"


def launch_difftool(
    parent: Path | None,
    branches: Sequence[Path],
    *,
    difftool: str | None = None,
    env: Mapping[str, str] | None = None,
) -> LaunchOutcome:
    """Detect the diff tool and start it; ``tui`` starts nothing (the caller shows its own
    viewer). Raises ``EditorLaunchError`` with a one-line reason when it cannot start."""
    environ = os.environ if env is None else env
    kind = EditorDetector.detect(environ, difftool=difftool)
    if kind == "tui":
        return LaunchOutcome(kind)
    processes = EditorDetector.invoke(kind, parent, list(branches), env=environ, difftool=difftool)
    return LaunchOutcome(kind, processes)


__all__ = [
    "AGREEMENT_STYLES",
    "EDITED_BY_YOU",
    "EDITED_STYLE",
    "PLACEHOLDER_DIR",
    "STATE_BADGES",
    "DiffPaths",
    "LaunchOutcome",
    "branch_id_of",
    "change_counts",
    "change_heading",
    "colorize_diff",
    "diff_head",
    "diff_line_style",
    "format_cost",
    "label_order",
    "launch_difftool",
    "state_badge",
]
