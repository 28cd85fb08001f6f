"""Rich text for the diff explorer's combine mode: numbered hunks per branch, and the
running "combined result" panel.

Why numbered hunks instead of the unified diff: a unified diff merges nearby changes into
one ``@@`` block with context, while the engine's combine numbers each change on its own
(``hunks_of``); showing the engine's hunks means "take hunk 2" takes exactly what is on
the screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.text import Text

from branching_core.review import PathDiff

from .combine_state import PathHunks, Preview, Selection
from .merge_diff import EDITED_BY_YOU, EDITED_STYLE, colorize_diff

Slot = tuple[str, int | None]
"""The explorer's cursor: (branch label, hunk index; ``None`` = the file as a whole)."""


@dataclass
class HunkPane:
    """The rendered pane plus where each cursor slot starts (line offsets, for scrolling)."""

    text: Text
    slots: list[Slot] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)


def _gap(text: Text) -> str:
    """One blank line before the next block, whether or not the last one ended a line."""
    return "\n" if text.plain.endswith("\n") else "\n\n"


def _lines_of(text: Text) -> int:
    return text.plain.count("\n")


def render_hunks(
    entry: PathDiff,
    touched: Sequence[str],
    untouched: Sequence[str],
    found: PathHunks,
    selection: Selection,
    cursor: int,
    edited_by_you: Sequence[str] = (),
) -> HunkPane:
    """Every touched branch's hunks (or, for a binary path, its placeholder), the cursor's
    slot marked ``▶`` and taken ones ``✓``."""
    body = Text(no_wrap=True, overflow="ellipsis")
    pane = HunkPane(body)
    whole = selection.file_label(entry.path)
    for index, label in enumerate(touched):
        change = entry.by_label(label)
        if change is None:
            continue
        if index:
            body.append(_gap(body))
        head_slot = len(pane.slots)
        hunks = [] if found.binary else found.hunks.get(label, [])
        if not hunks:  # binary, or nothing textual: the file is the only choice
            pane.slots.append((label, None))
            pane.offsets.append(_lines_of(body))
        mark = "▶ " if not hunks and cursor == head_slot else ""
        body.append(f"{mark}── {label} ", style="bold reverse")
        action = change.operation
        if change.operation == "renamed" and change.old_path:
            action = f"renamed from {change.old_path}"
        body.append(f" {action}", style="bold")
        if label in edited_by_you:
            body.append(f"  {EDITED_BY_YOU}", style=EDITED_STYLE)
        if whole == label:
            body.append("  ✓ whole file taken", style="bold green")
        body.append("\n")
        if not hunks:
            diff = change.unified_diff_vs_parent
            if diff:
                body.append_text(colorize_diff(diff))
            else:
                body.append("(no textual difference)", style="dim italic")
            continue
        for hunk in hunks:
            slot = len(pane.slots)
            pane.slots.append((label, hunk.index))
            pane.offsets.append(_lines_of(body))
            here = slot == cursor
            taken = selection.has_hunk(entry.path, label, hunk.index)
            if hunk.start != hunk.end:
                span = f"lines {hunk.start + 1}-{hunk.end}"
            else:
                span = f"after line {hunk.start}" if hunk.start else "at the top"
            header = f"{'▶' if here else ' '} @@ {label}#{hunk.index} · parent {span} @@"
            body.append(header, style="bold reverse cyan" if here else "cyan")
            if taken:
                body.append("  ✓ taken", style="bold green")
            body.append("\n")
            for line in found.parent_lines[hunk.start : hunk.end]:
                body.append(f"-{line.rstrip(chr(10))}\n", style="red")
            for line in hunk.lines:
                body.append(f"+{line.rstrip(chr(10))}\n", style="green")
    if untouched:
        body.append(f"{_gap(body)}unchanged in: {', '.join(untouched)}", style="dim")
    return pane


def render_combined(selection: Selection, preview: Preview | None, can_merge: bool) -> Text:
    """The running "combined result": what is taken from where, the base history, the
    engine's conflicts, and how to merge."""
    text = Text()
    text.append("Combined result\n", style="bold")
    lines = selection.lines()
    if not lines:
        text.append("nothing taken yet\nh: take the hunk at ▶\nf: take the whole file", style="dim")
        return text
    for line in lines:
        path, _, taken = line.partition("  ← ")
        text.append(f"{path}\n", style="bold")
        text.append(f"  ← {taken}\n")
    if preview is None:
        text.append("\nchecking…", style="dim italic")
        return text
    if preview.error:
        text.append(f"\n! {preview.error}", style="bold red")
        return text
    if preview.conflicts:
        text.append(f"\n{len(preview.conflicts)} conflict(s):\n", style="bold red")
        for conflict in preview.conflicts:
            text.append(f"✗ {conflict}\n", style="red")
        text.append("take one side only to merge", style="dim")
        return text
    if preview.base_label:
        text.append(f"\nhistory from: {preview.base_label}\n", style="dim")
    if can_merge:
        text.append("m: merge this combination", style="bold green")
    else:
        text.append("(no live fork here: preview only)", style="dim italic")
    return text


__all__ = ["HunkPane", "Slot", "render_combined", "render_hunks"]
