"""DiffExplorerScreen: every path the fork touched, and what each branch did to it.

The left pane is a tree of the report's paths (directories folded into nodes) labelled with
the agreement class and the branches that touched each path, so contested files (``split``)
stand out before the user reads a single diff. The right pane shows, for the highlighted
path, one unified diff per branch that touched it (a binary file shows the report's
placeholder, never raw bytes). ``o`` opens the detected external diff tool on that one path;
``Esc`` closes the screen, returning to whatever pushed it (merge picker, acceptance modal,
chat) with its state intact.

Combine (issue 17.1): the diffs are shown as the engine's numbered hunks; ``j``/``k`` move
the ``▶`` cursor over them (across branches), ``h`` takes the hunk under it, ``f`` the whole
file from the cursor's branch (a binary file only that way), ``x`` drops the path's choice.
The right-hand "combined result" panel lists what is taken from which branch, the history
the merge keeps and the conflicts the engine reports; ``m`` merges the combination through
``merge_or_select("combine", selection=...)`` (given a live fork) and the screen dismisses
with the ``MergeResult``. ``p`` shows how each branch worked (``coord.process_report()``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import PurePosixPath
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from branching_core import BranchingError
from branching_core.fork import CombineError
from branching_core.review import BranchDiffReport, PathDiff

from .combine_state import Combiner, PathHunks, Preview, ReportCombiner, Selection
from .hunk_view import Slot, render_combined, render_hunks
from .merge_diff import (
    AGREEMENT_STYLES,
    EDITED_BY_YOU,
    EDITED_STYLE,
    DiffPaths,
    LaunchOutcome,
    label_order,
    launch_difftool,
)

EXPLORER_HINT = (
    "↑/↓ path · j/k hunk · h take hunk · f take file · x drop · m merge combined · "
    "p process · o diff tool · Esc close"
)


class DiffExplorerScreen(Screen[Any]):
    """Tree of touched paths on the left, per-branch hunks of the selection in the middle,
    the combined result on the right.

    ``paths`` (parent + branch directories) is only needed for ``o``; ``labels`` fixes the
    branch order (default: the report's fork order); ``initial_path`` is highlighted first.
    ``combiner`` gives hunks, previews and the merge (``LiveCombiner`` for a live fork;
    default: the report's contents, preview only); ``process`` returns the fork's
    ``ProcessReport`` for ``p``; ``tests_line`` (which test command the review runs, and
    from where) is shown under the title. Dismisses with ``None`` (Esc) or the combined merge's
    ``MergeResult``.
    """

    CSS_PATH = "diff_explorer.tcss"

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("o", "open_tool", "Open in diff tool"),
        Binding("j", "move_hunk(1)", "Next hunk"),
        Binding("k", "move_hunk(-1)", "Prev hunk"),
        Binding("h", "take_hunk", "Take hunk"),
        Binding("f", "take_file", "Take file"),
        Binding("x", "drop_path", "Drop path"),
        Binding("m", "merge_combined", "Merge combined"),
        Binding("p", "process", "Process view"),
    ]

    def __init__(
        self,
        report: BranchDiffReport,
        *,
        paths: DiffPaths | None = None,
        difftool: str | None = None,
        labels: Sequence[str] = (),
        initial_path: str | None = None,
        env: Mapping[str, str] | None = None,
        combiner: Combiner | None = None,
        process: Callable[[], Any] | None = None,
        tests_line: str | None = None,
    ) -> None:
        super().__init__()
        self.tests_line = tests_line
        self.report = report
        self.diff_paths = paths
        self.difftool = difftool
        self.labels = label_order(report, labels)
        self.initial_path = initial_path
        self.env = env
        self.selected_path: str | None = None
        self.last_launch: LaunchOutcome | None = None
        self._path_nodes: dict[str, TreeNode[str]] = {}
        self.combiner: Combiner = combiner or ReportCombiner(report, self.labels)
        self.process = process
        self.selection = Selection()
        self.preview: Preview | None = None
        self.cursor = 0
        self.slots: list[Slot] = []
        self._offsets: list[int] = []
        self._hunks: dict[str, PathHunks] = {}

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        summary = self.report.summary
        with Vertical(id="diff-explorer"):
            yield Static(
                f"Diff explorer · {len(self.report.paths)} paths · "
                f"{summary.split_paths} split · agreement {summary.agreement_score:.2f}",
                id="diff-explorer-title",
            )
            if self.tests_line is not None:
                yield Static(Text(self.tests_line), id="diff-explorer-tests")
            with Horizontal(id="diff-explorer-body"):
                yield self._build_tree()
                with VerticalScroll(id="diff-pane"):
                    yield Static(id="diff-path-title")
                    yield Static(id="diff-branches")
                with VerticalScroll(id="combine-panel"):
                    yield Static(self._combined_text(), id="combine-result")
            yield Static(EXPLORER_HINT, id="diff-explorer-help")

    def _touched(self, entry: PathDiff) -> list[str]:
        """Labels (in branch order) of the branches that changed ``entry``."""
        return [lb for lb in self.labels if (c := entry.by_label(lb)) is not None and c.touched]

    def _build_tree(self) -> Tree[str]:
        tree: Tree[str] = Tree("paths", id="diff-tree")
        tree.show_root = False
        tree.guide_depth = 2
        dirs: dict[str, TreeNode[str]] = {"": tree.root}
        for entry in self.report.paths:
            parts = PurePosixPath(entry.path).parts
            parent_key = ""
            for part in parts[:-1]:
                key = f"{parent_key}/{part}" if parent_key else part
                if key not in dirs:
                    dirs[key] = dirs[parent_key].add(Text(f"{part}/"), expand=True)
                parent_key = key
            leaf = dirs[parent_key].add_leaf(self._leaf_label(entry, parts[-1]), data=entry.path)
            self._path_nodes[entry.path] = leaf
        tree.root.expand()
        return tree

    def _leaf_label(self, entry: PathDiff, name: str) -> Text:
        label = Text(name)
        if self._edited_by_you(entry.path):  # first: never the part a narrow pane cuts off
            label.append(f"  {EDITED_BY_YOU}", style=EDITED_STYLE)
        label.append(f"  {entry.agreement}", style=AGREEMENT_STYLES.get(entry.agreement, ""))
        touched = self._touched(entry)
        if touched:
            label.append(f"  {','.join(touched)}", style="dim")
        return label

    def _edited_by_you(self, path: str) -> tuple[str, ...]:
        """Branches whose mirror copy of ``path`` the user edited in their IDE (17.2)."""
        return self.diff_paths.user_edited.get(path, ()) if self.diff_paths else ()

    def on_mount(self) -> None:
        tree = self.query_one("#diff-tree", Tree)
        tree.focus()
        first = self.initial_path or (self.report.paths[0].path if self.report.paths else None)
        if first is not None:
            self.show_path(first)
        else:
            self.query_one("#diff-path-title", Static).update("the branches changed no files")

    # ------------------------------------------------------------------ selection

    def show_path(self, path: str) -> None:
        """Move the tree cursor to ``path`` and show its per-branch diffs."""
        tree = self.query_one("#diff-tree", Tree)
        node = self._path_nodes.get(path)
        if node is not None and tree.cursor_node is not node:
            tree.move_cursor(node)
        self._render_path(path)

    @on(Tree.NodeHighlighted, "#diff-tree")
    @on(Tree.NodeSelected, "#diff-tree")
    def _on_node(self, event: Tree.NodeHighlighted[str] | Tree.NodeSelected[str]) -> None:
        if event.node.data is not None:
            self._render_path(event.node.data)

    def _render_path(self, path: str) -> None:
        entry = self.report.path(path)
        if entry is None or path == self.selected_path:
            return
        self.selected_path = path
        self.cursor = 0
        touched = self._touched(entry)
        title = Text(path, style="bold")
        if edited := self._edited_by_you(path):
            title.append(f"  {EDITED_BY_YOU} in {', '.join(edited)}", style=EDITED_STYLE)
        title.append(f"  {entry.agreement}", style=AGREEMENT_STYLES.get(entry.agreement, ""))
        title.append(f"  touched by {', '.join(touched) or 'no branch'}", style="dim")
        self.query_one("#diff-path-title", Static).update(title)
        self._draw_hunks()
        self.query_one("#diff-pane", VerticalScroll).scroll_home(animate=False)

    def _path_hunks(self, path: str) -> PathHunks:
        """The path's hunks (read once per path: the numbering must not shift under the
        user's choices while the screen is open)."""
        if path not in self._hunks:
            try:
                self._hunks[path] = self.combiner.hunks(path)
            except (CombineError, OSError, UnicodeDecodeError) as exc:
                self._hunks[path] = PathHunks(binary=str(exc))
        return self._hunks[path]

    def _draw_hunks(self) -> None:
        """Redraw the middle pane for the selected path (cursor and taken marks)."""
        entry = self.report.path(self.selected_path) if self.selected_path else None
        if entry is None:
            return
        touched = self._touched(entry)
        untouched = [lb for lb in self.labels if lb not in touched]
        pane = render_hunks(
            entry,
            touched,
            untouched,
            self._path_hunks(entry.path),
            self.selection,
            self.cursor,
            edited_by_you=self._edited_by_you(entry.path),
        )
        self.slots, self._offsets = pane.slots, pane.offsets
        self.query_one("#diff-branches", Static).update(pane.text)

    def _combined_text(self) -> Text:
        return render_combined(self.selection, self.preview, self.combiner.can_merge)

    def _selection_changed(self) -> None:
        """Redraw the marks, then re-plan the combination (off the loop for a live fork)."""
        self._draw_hunks()
        self.preview = None
        if not self.selection.choices:
            self._show_combined()
            return
        if self.combiner.blocking:
            self._show_combined()  # "checking…" until the engine's plan is back
            self.run_worker(
                partial(self._preview_later, self.selection.as_engine()),
                group="combine-preview",
                exclusive=True,
            )
        else:
            self.preview = self.combiner.preview(self.selection.as_engine())
            self._show_combined()

    async def _preview_later(self, choices: dict[str, Any]) -> None:
        import asyncio

        preview = await asyncio.to_thread(self.combiner.preview, choices)
        if not self.is_attached:
            return  # closed meanwhile
        if choices == self.selection.as_engine():  # a newer choice has its own worker
            self.preview = preview
            self._show_combined()

    def _show_combined(self) -> None:
        self.query_one("#combine-result", Static).update(self._combined_text())

    # ------------------------------------------------------------------ actions

    def action_close(self) -> None:
        self.dismiss(None)

    def _slot(self) -> Slot | None:
        return self.slots[self.cursor] if 0 <= self.cursor < len(self.slots) else None

    def action_move_hunk(self, step: int) -> None:
        """Move the ``▶`` cursor to the next/previous hunk (across branches)."""
        if not self.slots:
            return
        self.cursor = max(0, min(self.cursor + step, len(self.slots) - 1))
        self._draw_hunks()
        pane = self.query_one("#diff-pane", VerticalScroll)
        title = self.query_one("#diff-path-title", Static)
        line = self._offsets[self.cursor] if self.cursor < len(self._offsets) else 0
        pane.scroll_to(y=max(line + title.outer_size.height - 1, 0), animate=False)

    def action_take_hunk(self) -> None:
        slot, path = self._slot(), self.selected_path
        if slot is None or path is None:
            self.notify("no hunk here", severity="warning", markup=False)
            return
        label, index = slot
        if index is None:
            why = self._path_hunks(path).binary or "no textual hunk"
            self.notify(f"{path}: {why}; take it per file (f)", severity="warning", markup=False)
            return
        self.selection.take_hunk(path, label, index)
        self._selection_changed()

    def action_take_file(self) -> None:
        slot, path = self._slot(), self.selected_path
        if slot is None or path is None:
            self.notify("no branch changed this path", severity="warning", markup=False)
            return
        self.selection.take_file(path, slot[0])
        self._selection_changed()

    def action_drop_path(self) -> None:
        if self.selected_path is not None and self.selection.drop(self.selected_path):
            self._selection_changed()

    def action_merge_combined(self) -> None:
        """Merge the combination through the coordinator (the engine re-checks it all)."""
        merge = getattr(self.combiner, "merge", None)
        if not self.combiner.can_merge or merge is None:
            self.notify(
                "no live fork here: the combination can be previewed, not merged",
                severity="warning",
                markup=False,
            )
            return
        if not self.selection.choices:
            self.notify("nothing taken yet: h takes a hunk, f a file", markup=False)
            return
        if self.preview is not None and self.preview.conflicts:
            self.notify(
                "the combination has conflicts (see the panel): take one side only",
                severity="error",
                markup=False,
            )
            return
        self.run_worker(
            partial(self._merge, merge, self.selection.as_engine()),
            group="combine-merge",
            exclusive=True,
        )

    async def _merge(self, merge: Any, choices: dict[str, Any]) -> None:
        self.notify("merging the combination…", markup=False)
        try:
            result = await merge(choices, None)
        except (CombineError, RuntimeError, OSError) as exc:
            self.notify(f"not merged: {exc}", severity="error", markup=False)
            return
        self.dismiss(result)

    def action_process(self) -> None:
        """How each branch worked: the process report in a modal."""
        from .process_view import ProcessViewModal

        if self.process is None:
            self.notify("no live fork here: no tool calls to show", markup=False)
            return
        try:
            report = self.process()
        except RuntimeError as exc:
            self.notify(str(exc), severity="warning", markup=False)
            return
        self.app.push_screen(ProcessViewModal(report))

    def action_open_tool(self) -> None:
        """Open the external diff tool on the selected path (parent vs. the branches)."""
        entry = self.report.path(self.selected_path) if self.selected_path else None
        if entry is None:
            self.notify("no path selected", severity="warning", markup=False)
            return
        if self.diff_paths is None:
            self.notify(
                "no branch directories known for the diff tool", severity="warning", markup=False
            )
            return
        parent, branches = self.diff_paths.for_entry(entry, self.labels)
        if not branches:
            self.notify(f"no branch directory holds {entry.path}", severity="warning", markup=False)
            return
        try:
            outcome = launch_difftool(parent, branches, difftool=self.difftool, env=self.env)
        except BranchingError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.last_launch = outcome
        if outcome.wants_tui:
            self.notify(
                "no external diff tool found (set FORKDECK_DIFFTOOL); the diff is shown here",
                markup=False,
            )
        else:
            self.notify(f"opened {entry.path} in the {outcome.kind} diff tool", markup=False)


__all__ = ["DiffExplorerScreen"]
