"""The diff explorer's combine mode without a screen: hunks, the selection, its preview.

Why apart from the screen: what a key press changes (take this hunk / this file from a
branch, drop a path) and what the "combined result" panel says are plain data, testable
alone; the screen only draws them. Hunks are numbered exactly as the engine numbers them
(``branching_core.fork.combine.hunks_of``), so ``"a:2"`` in the selection is hunk 2 the
user saw, and the selection is what ``merge_or_select("combine", selection=...)`` takes.

Two sources of hunks and previews:

* :class:`LiveCombiner` reads the fork's files (``branch_hunks``) and plans with the
  engine (``coordinator.combine_preview``), so the conflicts shown are the engine's own;
  its preview reads files, so the screen runs it in a worker thread (``blocking``);
* :class:`ReportCombiner` works from a ``BranchDiffReport``'s contents alone (no fork to
  merge into: the explorer can show and plan a combination, not merge it); its conflict
  lines use the engine's ``Hunk.overlaps`` and wording.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from branching_core.fork import (
    PARENT,
    CombineConflict,
    CombineError,
    Hunk,
    branch_hunks,
    hunks_of,
)
from branching_core.review import BranchDiffReport

Choice = str | list[str]
"""A path's choice: a branch label (the whole file) or ``["label:index", ...]`` hunks."""

MergeCombination = Callable[[dict[str, Choice], str | None], Awaitable[Any]]
"""Runs the combined merge (selection, base) and returns the ``MergeResult``."""


@dataclass
class PathHunks:
    """What the explorer shows for one path in combine mode."""

    parent_lines: list[str] = field(default_factory=list)
    hunks: dict[str, list[Hunk]] = field(default_factory=dict)
    binary: str | None = None
    """Why this path can only be taken per file (``None``: hunks are available)."""


@dataclass
class Preview:
    """The planned combination as the engine (or the report) sees it."""

    base_label: str | None = None
    conflicts: list[str] = field(default_factory=list)
    error: str | None = None


class Combiner(Protocol):
    """Where the explorer's hunks and previews come from."""

    blocking: bool
    can_merge: bool

    def hunks(self, path: str) -> PathHunks: ...

    def preview(self, selection: Mapping[str, Choice]) -> Preview: ...


def _lines(data: str | bytes | None) -> list[str]:
    if data is None:
        return []
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return text.splitlines(keepends=True)


def _base(selection: Mapping[str, Choice], order: Sequence[str]) -> str | None:
    """The engine's default base: the branch most paths/hunks were taken from."""
    counts: Counter[str] = Counter()
    for choice in selection.values():
        if isinstance(choice, str):
            if choice != PARENT:
                counts[choice] += 1
        else:
            counts.update(c.rpartition(":")[0] for c in choice)
    if not counts:
        return order[0] if order else None
    return max(counts, key=lambda b: (counts[b], -order.index(b) if b in order else 0))


class ReportCombiner:
    """Hunks and previews from a report's contents (no fork: it plans, never merges)."""

    blocking = False
    can_merge = False

    def __init__(self, report: BranchDiffReport, labels: Sequence[str]) -> None:
        self.report = report
        self.labels = list(labels)

    def hunks(self, path: str) -> PathHunks:
        entry = self.report.path(path)
        if entry is None:
            return PathHunks(binary="not in the report")
        if entry.parent_is_binary:
            return PathHunks(binary="binary file: take it per file (f), not per hunk")
        out = PathHunks(parent_lines=_lines(entry.parent_content))
        for label in self.labels:
            change = entry.by_label(label)
            if change is None or not change.touched:
                continue
            if change.is_binary:
                return PathHunks(binary="binary file: take it per file (f), not per hunk")
            new = None if change.operation == "deleted" else change.new_content
            out.hunks[label] = hunks_of(
                label,
                (entry.parent_content or "").encode() if entry.parent_exists else None,
                new.encode() if new is not None else None,
            )
        return out

    def preview(self, selection: Mapping[str, Choice]) -> Preview:
        conflicts: list[str] = []
        for path, choice in selection.items():
            if isinstance(choice, str):
                continue
            found = self.hunks(path)
            chosen: list[Hunk] = []
            for c in choice:
                label, _, index = c.rpartition(":")
                hunks = found.hunks.get(label, [])
                if int(index) < len(hunks):
                    chosen.append(hunks[int(index)])
            unique: list[Hunk] = []
            for h in sorted(chosen, key=lambda h: (h.start, h.end, h.label)):
                if any((u.start, u.end, u.lines) == (h.start, h.end, h.lines) for u in unique):
                    continue
                conflicts.extend(
                    f"{path}: hunk {u.label}#{u.index} (lines {u.start + 1}-{u.end}) overlaps "
                    f"hunk {h.label}#{h.index} (lines {h.start + 1}-{h.end})"
                    for u in unique
                    if u.overlaps(h)
                )
                unique.append(h)
        return Preview(base_label=_base(selection, self.labels), conflicts=conflicts)


class LiveCombiner:
    """Hunks from the fork's files, previews from the engine, merges through ``merge``."""

    blocking = True

    def __init__(self, coordinator: Any, merge: MergeCombination | None = None) -> None:
        self.coordinator = coordinator
        self.merge = merge
        self.can_merge = merge is not None

    def hunks(self, path: str) -> PathHunks:
        try:
            hunks = branch_hunks(self.coordinator, path)
        except CombineError as exc:
            return PathHunks(binary=f"{exc}".replace("per file,", "per file (f),"))
        parent = Path(self.coordinator.parent_path) / path
        try:
            parent_lines = _lines(parent.read_bytes()) if parent.is_file() else []
        except (OSError, UnicodeDecodeError):
            parent_lines = []
        return PathHunks(parent_lines=parent_lines, hunks={k: v for k, v in hunks.items() if v})

    def preview(self, selection: Mapping[str, Choice]) -> Preview:
        try:
            plan = self.coordinator.combine_preview(dict(selection))
        except CombineConflict as exc:
            return Preview(conflicts=list(exc.conflicts))
        except (CombineError, OSError, RuntimeError) as exc:
            return Preview(error=str(exc))
        return Preview(base_label=plan.base_label)


class Selection:
    """The user's running choice per path (insertion order = the order it was made)."""

    def __init__(self) -> None:
        self.choices: dict[str, Choice] = {}

    def take_file(self, path: str, label: str) -> bool:
        """Take ``path`` whole from ``label``; again on the same label drops it. True: taken."""
        if self.choices.get(path) == label:
            del self.choices[path]
            return False
        self.choices[path] = label
        return True

    def take_hunk(self, path: str, label: str, index: int) -> bool:
        """Toggle hunk ``index`` of ``label`` (a whole-file choice turns into hunks)."""
        key = f"{label}:{index}"
        current = self.choices.get(path)
        hunks = list(current) if isinstance(current, list) else []
        if key in hunks:
            hunks.remove(key)
            taken = False
        else:
            hunks.append(key)
            taken = True
        if hunks:
            self.choices[path] = hunks
        else:
            self.choices.pop(path, None)
        return taken

    def drop(self, path: str) -> bool:
        return self.choices.pop(path, None) is not None

    def file_label(self, path: str) -> str | None:
        choice = self.choices.get(path)
        return choice if isinstance(choice, str) else None

    def has_hunk(self, path: str, label: str, index: int) -> bool:
        choice = self.choices.get(path)
        return isinstance(choice, list) and f"{label}:{index}" in choice

    def as_engine(self) -> dict[str, Choice]:
        """A copy in the engine's form (``merge_or_select("combine", selection=...)``)."""
        return {p: (c if isinstance(c, str) else list(c)) for p, c in self.choices.items()}

    def lines(self) -> list[str]:
        """``src/app.py  ← hunks a#0, c#1`` / ``logo.bin  ← c (whole file)``, one per path."""
        out = []
        for path, choice in self.choices.items():
            if isinstance(choice, str):
                out.append(f"{path}  ← {choice} (whole file)")
            else:
                taken = ", ".join(c.replace(":", "#") for c in choice)
                out.append(f"{path}  ← hunks {taken}")
        return out


__all__ = [
    "Choice",
    "Combiner",
    "LiveCombiner",
    "MergeCombination",
    "PathHunks",
    "Preview",
    "ReportCombiner",
    "Selection",
]
