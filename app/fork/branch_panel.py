"""``BranchPanelWidget``: one branch's transcript, streamed live.

Why this shape: ten branches may stream at once, so a token must cost next to nothing.
Text deltas are appended to a buffer (:meth:`append_text`) and written to the screen at
most once per :data:`FLUSH_INTERVAL` per panel, into the *current* assistant block only;
earlier blocks (the steer prompt, tool calls, results, steering messages) are separate
widgets that are never re-rendered. Model text is shown as plain text (never parsed as
markup), so a ``[`` in a reply cannot break or restyle the panel.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.timer import Timer
from textual.widgets import Static

from ..common.redraw import update_in_place
from .fork_tabs import STATE_BADGES
from .transcript_block import TranscriptBlock

FLUSH_INTERVAL = 1 / 10
"""Seconds between two screen updates of the shown panel's streamed text (10 per second:
still reads as a live stream, and half the repaints competing with the keyboard for the
event loop while ten branches stream)."""

BLOCK_CHARS = 2000
"""A streamed reply longer than this continues in a new block at its next line break."""
ARGS_WIDTH = 200
RESULT_LINES = 3
RESULT_WIDTH = 300


def _block_break(text: str, current: int) -> int | None:
    """Where ``text`` (to be appended to a block of ``current`` characters) should start a
    new block: at its last line break once the block passed :data:`BLOCK_CHARS`, or, with
    no line break in sight, at a space once it passed 2 x BLOCK_CHARS; None: no break."""
    if current + len(text) <= BLOCK_CHARS:
        return None
    if current > BLOCK_CHARS and "\n" in text:
        return text.rindex("\n")
    if current + len(text) > 2 * BLOCK_CHARS:
        limit = max(1, 2 * BLOCK_CHARS - current)
        for sep in ("\n", " "):
            cut = text.rfind(sep, 0, limit)
            if cut > 0:
                return cut
        return limit if limit < len(text) else None
    return None


def one_line(value: Any, width: int = ARGS_WIDTH) -> str:
    """Tool arguments as one short line (JSON for dicts, the text itself for strings)."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError):
            text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def short_result(content: str) -> str:
    """The head of a tool result: at most :data:`RESULT_LINES` lines."""
    lines = content.strip().splitlines() or [""]
    head = "\n".join(line[:RESULT_WIDTH] for line in lines[:RESULT_LINES])
    if len(lines) > RESULT_LINES:
        head += f"\n… ({len(lines) - RESULT_LINES} more lines)"
    return head


def format_cost(cost_usd: float | None, budget_usd: float | None) -> str:
    cost = "$?" if cost_usd is None else f"${cost_usd:.4f}"
    return cost if budget_usd is None else f"{cost} / ${budget_usd:g}"


class ResultBlock(TranscriptBlock):
    """A tool result: its head (:data:`RESULT_LINES` lines) until clicked, then all of it.

    Why not always the whole text: ten branches running test suites would bury every
    transcript under output. The whole text stays in ``full_text`` for the click, for
    ``ctrl+o`` (the full-output screen) and for copying.
    """

    def __init__(self, tool_name: str, content: str) -> None:
        self.tool_name = tool_name
        self.full_text = content
        self.expanded = False
        super().__init__("result", self._render_text())
        self.set_class(self.expandable, "-expandable")

    @property
    def expandable(self) -> bool:
        return short_result(self.full_text) != self.full_text.strip()

    def _render_text(self) -> str:
        if self.expanded:
            return f"↳ {self.tool_name}: {self.full_text.rstrip()}\n(click to fold)"
        head = short_result(self.full_text)
        hint = "  (click: expand · ctrl+o: full output)" if self.expandable else ""
        return f"↳ {self.tool_name}: {head}{hint}"

    def toggle(self) -> None:
        """Expand to the whole result, or fold back to its head."""
        if not self.expandable:
            return
        self.expanded = not self.expanded
        self.set_class(self.expanded, "-expanded")
        self.set_text(self._render_text())

    def on_click(self) -> None:
        self.toggle()


class BranchPanelWidget(Vertical):
    """The transcript of branch ``label``: steer prompt, streamed text, tools, steering."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    def __init__(
        self,
        label: str,
        *,
        steer: str = "",
        model: str | None = None,
        budget_usd: float | None = None,
        state: str = "running",
        cost_usd: float | None = 0.0,
        id: str | None = None,
        classes: str | None = None,
        shown: bool = True,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.shown = shown
        """False while another tab is shown: nothing is drawn or mounted until shown."""
        self._header_stale = False
        self.label = label
        self.steer = steer
        self.model = model
        self.budget_usd = budget_usd
        self.state = state
        self.error: str | None = None
        self.cost_usd = cost_usd
        self._blocks: list[TranscriptBlock] = []
        self._pending: list[str] = []
        self._stream_block: TranscriptBlock | None = None
        self._in_response = False
        """True while a model response streams (between its first event and its end)."""
        self._steers_next: list[str] = []
        """Steers the model sees in its next request (drawn when that response starts)."""
        self._steers_later: list[str] = []
        """Steers sent while a response streamed: they reach the request after it."""
        self._flush_timer: Timer | None = None
        self.flushes = 0
        """How many times streamed text reached the screen (for tests and benchmarks)."""
        if steer:
            self._blocks.append(TranscriptBlock("prompt", f"> {steer}"))

    def compose(self) -> ComposeResult:
        yield Static(Content(self.header_text), classes="header")
        with VerticalScroll(classes="transcript"):
            yield from self._blocks

    # -- read ------------------------------------------------------------------------------
    @property
    def header_text(self) -> str:
        badge = STATE_BADGES.get(self.state, "?")
        model = self.model or "default model"
        state = self.state.replace("_", " ")
        queued = len(self._steers_next) + len(self._steers_later)
        return (
            f"branch {self.label} · {badge} {state} · {model} · "
            f"{format_cost(self.cost_usd, self.budget_usd)}"
            + (f" · {queued} steer{'s' if queued != 1 else ''} queued" if queued else "")
        )

    @property
    def blocks(self) -> list[TranscriptBlock]:
        return list(self._blocks)

    @property
    def transcript_text(self) -> str:
        """Everything on the panel's transcript so far, streamed text included (a hidden
        panel keeps its streamed text buffered until it is shown)."""
        text = "\n".join(block.text for block in self._blocks)
        if self._pending:
            glue = "" if self._stream_block is not None or not text else "\n"
            text += glue + "".join(self._pending)
        return text

    def tail_text(self, chars: int) -> str:
        """The last ``chars`` characters of the transcript, streamed text included, read
        from the newest blocks only (the overview asks 5 times a second per branch)."""
        parts = ["".join(self._pending)]
        size = len(parts[0])
        for block in reversed(self._blocks):
            if size >= chars:
                break
            parts.append(block.text + "\n")
            size += len(block.text) + 1
        return "".join(reversed(parts))[-chars:]

    @property
    def pending_text(self) -> str:
        """Streamed text received but not yet drawn (drawn within FLUSH_INTERVAL)."""
        return "".join(self._pending)

    # -- streamed text ---------------------------------------------------------------------
    def append_text(self, delta: str) -> None:
        """Buffer one text delta; it reaches the screen on the next flush tick."""
        if not delta:
            return
        if not self._in_response:
            self._begin_response()
        self._pending.append(delta)
        if self._flush_timer is None and self.is_mounted and self.shown:
            self._flush_timer = self.set_timer(FLUSH_INTERVAL, self.flush)

    def set_shown(self, shown: bool) -> None:
        """The tab strip shows this panel (True) or another one (False).

        Why: ten branches stream at once and each drawn update costs a screen layout
        (about 14 ms on a loaded 2-core machine); hidden panels only buffer and catch up
        in one go when shown, so the keyboard stays fast whatever streams behind.
        """
        if shown == self.shown:
            return
        self.shown = shown
        if not shown or not self.is_mounted:
            return
        scroll = self.query_one(".transcript", VerticalScroll)
        missing = [b for b in self._blocks if b.parent is None]
        if missing:
            scroll.mount_all(missing)
        for block in self._blocks:
            block.redraw()
        if self._header_stale:
            self._update_header()
        self.flush()

    def flush(self) -> None:
        """Draw buffered text now (one widget update however many deltas came in)."""
        self._flush_timer = None
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        block = self._stream_block
        while True:
            current = len(block.text) if block is not None else 0
            cut = _block_break(text, current)
            if cut is None:
                break
            # A long reply continues in a new block at a line break (or, in a paragraph
            # far too long for one, at a space), so a flush re-wraps at most a few
            # thousand characters rather than the whole reply.
            head, text = text[:cut], text[cut:].removeprefix("\n")
            if block is None:
                block = self._add_block("assistant", head)
            else:
                block.set_text(block.text + head, draw=self.shown)
            block = self._stream_block = None
        if text:
            if block is None:
                self._stream_block = self._add_block("assistant", text)
            else:
                block.set_text(block.text + text, draw=self.shown)
        self.flushes += 1

    def _end_stream(self) -> None:
        self.flush()
        self._stream_block = None

    def end_text_block(self) -> None:
        """A new model response starts: its text goes in a block of its own."""
        self._end_stream()

    # -- other entries ---------------------------------------------------------------------
    def add_tool_call(self, tool_name: str, args: Any, tool_call_id: str = "") -> None:
        self._end_stream()
        self._add_block("tool", f"⚙ {tool_name} {one_line(args)}".rstrip())

    def add_tool_result(self, tool_name: str, content: str, tool_call_id: str = "") -> None:
        self._end_stream()
        self._mount_block(ResultBlock(tool_name, content))

    @property
    def results(self) -> list[ResultBlock]:
        """The tool results shown so far, oldest first (each keeps its full text)."""
        return [b for b in self._blocks if isinstance(b, ResultBlock)]

    def scroll_page(self, pages: int) -> None:
        """Scroll the transcript ``pages`` screens (negative: up); keyboard scrolling.

        Up lets go of the newest line (streamed text no longer pulls the view down); paging
        back down to the end follows it again (Textual's anchor does both).
        """
        if not self.is_mounted:
            return
        scroll = self.query_one(".transcript", VerticalScroll)
        step = max(1, scroll.scrollable_content_region.height - 1)
        target = scroll.scroll_y + pages * step
        if target >= scroll.max_scroll_y:
            scroll.anchor()
        else:
            scroll.release_anchor()
            scroll.scroll_to(y=target, animate=False, immediate=True)

    def scroll_edge(self, end: bool) -> None:
        """Jump to the top (``end`` False) or to the newest line (and follow it)."""
        if not self.is_mounted:
            return
        scroll = self.query_one(".transcript", VerticalScroll)
        if end:
            scroll.anchor()
        else:
            scroll.release_anchor()
            scroll.scroll_home(animate=False, immediate=True)

    def add_steer(self, message: str) -> None:
        """A steering message, drawn where the model receives it: before the response to
        the next model request (issue 13.20). Sent while a response streams, that is the
        request after the current response and its tool calls; sent between responses,
        the very next one. Until then the header counts it as queued."""
        (self._steers_later if self._in_response else self._steers_next).append(message)
        self._update_header()

    def begin_request(self) -> None:
        """A model request was sent (issue 24.9): steers queued before it are in it and are
        drawn here, above its response; a steer sent from now until that response ends
        missed it and waits for the next request. (The in-flight state began at the first
        streamed token, so with a real model's long wait for it a steer typed meanwhile was
        drawn above a response that never saw it.)"""
        self._end_stream()
        if not self._in_response:
            self._begin_response()

    def end_response(self) -> None:
        """One model response is complete (the coordinator priced it): the next text
        starts a new block (issue 14.12: responses were glued into one paragraph)."""
        if not self._in_response:
            self._begin_response()  # a response with no text (tool calls only)
        self._end_stream()
        self._in_response = False
        self._steers_next += self._steers_later
        self._steers_later = []

    def _begin_response(self) -> None:
        self._in_response = True
        steers, self._steers_next = self._steers_next, []
        if steers:
            self._end_stream()
            for message in steers:
                self._add_block("steer", f">> {message}")
            self._update_header()

    def _settle_steers(self) -> None:
        """The run ended: draw steers still queued, saying they came too late."""
        steers = self._steers_next + self._steers_later
        self._steers_next, self._steers_later = [], []
        self._in_response = False
        for message in steers:
            self._add_block("steer", f">> {message}  (after the run ended)")

    def append_terminal(self, line: str) -> None:
        """One line of an external agent's terminal (colours kept, see terminal_block)."""
        from .terminal_block import TerminalBlock

        last = self._blocks[-1] if self._blocks else None
        if not isinstance(last, TerminalBlock):
            self._end_stream()
            last = TerminalBlock()
            self._mount_block(last)
        last.add_line(line, draw=self.is_mounted and self.shown)

    def add_user_message(self, message: str) -> None:
        """A follow-up turn the user started on this (finished) branch."""
        self._end_stream()
        self._add_block("user", f"> {message}")

    def add_note(self, message: str) -> None:
        """A line from the UI itself (e.g. 'waiting for approval')."""
        self._end_stream()
        self._add_block("note", message)

    def set_state(self, state: str, error: str | None = None) -> None:
        if state != "running":
            self._end_stream()
            if state != "awaiting_approval":
                self._settle_steers()
        self.state = state
        if error and error != self.error:
            self._add_block("error", f"{STATE_BADGES.get(state, '!')} {error}")
        self.error = error
        self._update_header()

    def set_cost(self, cost_usd: float | None) -> None:
        self.cost_usd = cost_usd
        self._update_header()

    # -- internals -------------------------------------------------------------------------
    def _update_header(self) -> None:
        if not self.shown:
            self._header_stale = True
        elif self.is_mounted:
            self._header_stale = False
            update_in_place(self.query_one(".header", Static), Content(self.header_text))

    def _add_block(self, kind: str, text: str) -> TranscriptBlock:
        return self._mount_block(TranscriptBlock(kind, text))

    def _mount_block(self, block: TranscriptBlock) -> TranscriptBlock:
        self._blocks.append(block)
        if self.is_mounted and self.shown:  # hidden: mounted when shown (set_shown)
            self.query_one(".transcript", VerticalScroll).mount(block)
        return block

    def on_mount(self) -> None:
        # Anchored: the view stays on the newest line as blocks arrive, also while the panel
        # is hidden behind another tab (a hidden panel has no size to scroll in, so an
        # explicit scroll_end there did nothing and switching to a finished branch showed
        # its top, issue 13.17); the user scrolling up lets go until back at the end.
        scroll = self.query_one(".transcript", VerticalScroll)
        scroll.anchor()
        # Blocks added before mounting (a panel built for a running fork) go in now.
        missing = [b for b in self._blocks if not b.is_mounted and b.parent is None]
        if missing and self.shown:
            scroll.mount_all(missing)
        if self._pending and self._flush_timer is None and self.shown:
            self._flush_timer = self.set_timer(FLUSH_INTERVAL, self.flush)
