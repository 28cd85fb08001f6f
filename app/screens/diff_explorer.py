"""DiffExplorerScreen: every path the fork touched, and what each branch did to it.

The left pane is a tree of the report's paths (directories folded into nodes) labelled with
the agreement class and the branches that touched each path, so contested files (``split``)
stand out before the user reads a single diff. The right pane shows, for the highlighted
path, one unified diff per branch that touched it (a binary file shows the report's
placeholder, never raw bytes). ``o`` opens the detected external diff tool on that one path;
``Esc`` closes the screen, returning to whatever pushed it (merge picker, acceptance modal,
chat) with its state intact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from app.widgets.merge_diff import (
    AGREEMENT_STYLES,
    EDITED_BY_YOU,
    EDITED_STYLE,
    DiffPaths,
    LaunchOutcome,
    colorize_diff,
    label_order,
    launch_difftool,
)
from branching_core.errors import BranchingError
from branching_core.review.types import BranchDiffReport, PathDiff


class DiffExplorerScreen(Screen[None]):
    """Tree of touched paths on the left, per-branch unified diffs of the selection on the right.

    ``paths`` (parent + branch directories) is only needed for ``o``; ``labels`` fixes the
    branch order (default: the report's fork order); ``initial_path`` is highlighted first.
    """

    CSS_PATH = "diff_explorer.tcss"

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("o", "open_tool", "Open in diff tool"),
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
    ) -> None:
        super().__init__()
        self.report = report
        self.diff_paths = paths
        self.difftool = difftool
        self.labels = label_order(report, labels)
        self.initial_path = initial_path
        self.env = env
        self.selected_path: str | None = None
        self.last_launch: LaunchOutcome | None = None
        self._path_nodes: dict[str, TreeNode[str]] = {}

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        summary = self.report.summary
        with Vertical(id="diff-explorer"):
            yield Static(
                f"Diff explorer · {len(self.report.paths)} paths · "
                f"{summary.split_paths} split · agreement {summary.agreement_score:.2f}",
                id="diff-explorer-title",
            )
            with Horizontal(id="diff-explorer-body"):
                yield self._build_tree()
                with VerticalScroll(id="diff-pane"):
                    yield Static(id="diff-path-title")
                    yield Static(id="diff-branches")
            yield Static(
                "↑/↓ select path · o open in diff tool · Esc close", id="diff-explorer-help"
            )

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
        touched = self._touched(entry)
        title = Text(path, style="bold")
        if edited := self._edited_by_you(path):
            title.append(f"  {EDITED_BY_YOU} in {', '.join(edited)}", style=EDITED_STYLE)
        title.append(f"  {entry.agreement}", style=AGREEMENT_STYLES.get(entry.agreement, ""))
        title.append(f"  touched by {', '.join(touched) or 'no branch'}", style="dim")
        self.query_one("#diff-path-title", Static).update(title)
        self.query_one("#diff-branches", Static).update(self._branch_diffs(entry, touched))
        self.query_one("#diff-pane", VerticalScroll).scroll_home(animate=False)

    def _branch_diffs(self, entry: PathDiff, touched: list[str]) -> Text:
        body = Text(no_wrap=True, overflow="ellipsis")
        for index, label in enumerate(touched):
            change = entry.by_label(label)
            if change is None:
                continue
            if index:
                body.append("\n\n")
            body.append(f"── {label} ", style="bold reverse")
            action = change.operation
            if change.operation == "renamed" and change.old_path:
                action = f"renamed from {change.old_path}"
            body.append(f" {action}", style="bold")
            if label in self._edited_by_you(entry.path):
                body.append(f"  {EDITED_BY_YOU}", style=EDITED_STYLE)
            body.append("\n")
            diff = change.unified_diff_vs_parent
            if diff:
                body.append_text(colorize_diff(diff))
            else:
                body.append("(no textual difference)", style="dim italic")
        untouched = [lb for lb in self.labels if lb not in touched]
        if untouched:
            body.append(f"\n\nunchanged in: {', '.join(untouched)}", style="dim")
        return body

    # ------------------------------------------------------------------ actions

    def action_close(self) -> None:
        self.dismiss(None)

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
