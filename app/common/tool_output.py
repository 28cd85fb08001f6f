"""``ToolOutputModal``: the full text of a branch's tool results, one at a time.

Why a screen of its own: a branch panel shows each result's head only (ten branches
running test suites would bury every transcript), and even expanded in place a long test
log is hard to read between the other blocks. ``ctrl+o`` on a branch tab opens this on the
newest result; ``←``/``→`` walk to older/newer ones, ``↑``/``↓``/PgUp/PgDn/Home/End scroll,
``c`` copies the shown result, Esc closes. Text is shown literally (never as markup).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

FULL_OUTPUT_LIMIT = 200_000
"""Characters shown at most (the head and tail of a larger output, with a marker)."""


@dataclass(frozen=True)
class ToolOutput:
    """One tool result: which tool, and everything it returned."""

    tool_name: str
    text: str


def clip(text: str, limit: int = FULL_OUTPUT_LIMIT) -> str:
    """``text``, or its head and tail around a ``[… N characters …]`` marker."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half:,} characters …]\n{text[-half:]}"


class ToolOutputModal(ModalScreen[None]):
    """Full text of ``outputs[index]`` of branch ``label`` (see the module docstring)."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("left", "step(-1)", "Older"),
        Binding("right", "step(1)", "Newer"),
        Binding("c", "copy", "Copy"),
        Binding("up", "scroll(-1)", show=False),
        Binding("down", "scroll(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home", "edge(False)", show=False),
        Binding("end", "edge(True)", show=False),
    ]

    def __init__(self, label: str, outputs: Sequence[ToolOutput], index: int = -1) -> None:
        super().__init__()
        if not outputs:
            raise ValueError("no tool output to show")
        self.label = label
        self.outputs = list(outputs)
        self.index = index % len(self.outputs)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("", id="title")
            with VerticalScroll(id="body", can_focus=False):
                yield Static("", id="text")
            yield Static(
                "←/→ older/newer · ↑↓ PgUp PgDn Home End scroll · c copy · Esc close", id="hint"
            )

    def on_mount(self) -> None:
        self._show()

    @property
    def shown(self) -> ToolOutput:
        return self.outputs[self.index]

    def _show(self) -> None:
        output = self.shown
        lines = output.text.count("\n") + 1
        self.query_one("#title", Static).update(
            Content(
                f"{'branch ' + self.label if self.label else 'the chat'}"
                f" · {output.tool_name} · result {self.index + 1} of "
                f"{len(self.outputs)} · {lines} line{'s' if lines != 1 else ''}"
            )
        )
        self.query_one("#text", Static).update(Content(clip(output.text)))
        self.query_one("#body", VerticalScroll).scroll_home(animate=False)

    def action_step(self, step: int) -> None:
        target = self.index + step
        if 0 <= target < len(self.outputs):
            self.index = target
            self._show()

    def action_scroll(self, lines: int) -> None:
        body = self.query_one("#body", VerticalScroll)
        body.scroll_to(y=body.scroll_y + lines, animate=False)

    def action_page(self, pages: int) -> None:
        body = self.query_one("#body", VerticalScroll)
        step = max(1, body.scrollable_content_region.height - 1)
        body.scroll_to(y=body.scroll_y + pages * step, animate=False)

    def action_edge(self, end: bool) -> None:
        body = self.query_one("#body", VerticalScroll)
        if end:
            body.scroll_end(animate=False)
        else:
            body.scroll_home(animate=False)

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.shown.text)
        self.notify(f"copied {len(self.shown.text):,} characters", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)


__all__ = ["FULL_OUTPUT_LIMIT", "ToolOutput", "ToolOutputModal", "clip"]
