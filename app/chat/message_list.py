"""The chat transcript: user prompts, streamed assistant text, tool calls with their results.

Why its own widget: the same list shows a live turn (fed delta by delta through the
``on_text`` / ``on_tool_call`` / ``on_tool_result`` sink methods that
``ChatSession.run_turn`` calls) and a whole history at once (``show_history``, used after a
merge when the winner's conversation becomes the chat).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Static

ARGS_PREVIEW = 60
RESULT_PREVIEW_LINES = 4
"""Lines of a tool result shown under its call while collapsed (issue 24.8: a result was
hidden behind its title, and the offline summary showed only its first line)."""


class UserMessage(Static):
    """One prompt the user sent."""

    def __init__(self, text: str, **kwargs: Any) -> None:
        super().__init__(f"> {text}", markup=False, **kwargs)
        self.text = text


class AssistantMessage(Static):
    """Assistant text, growing as deltas arrive."""

    def __init__(self, text: str = "", **kwargs: Any) -> None:
        super().__init__(text, markup=False, **kwargs)
        self.text = text

    def append(self, delta: str) -> None:
        self.text += delta
        self.update(self.text)


class Notice(Static):
    """A line from forkdeck itself (command output, errors, the greeting)."""

    def __init__(self, text: str, severity: str = "information", **kwargs: Any) -> None:
        super().__init__(text, markup=False, **kwargs)
        self.add_class(f"-{severity}")
        self.text = text


class ToolCallView(Collapsible):
    """A tool call: the title says what ran and how it ended, expanding shows args and result."""

    def __init__(self, tool_call_id: str, tool_name: str, args: Any) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.args_text = _format_args(args)
        self.result_text: str | None = None
        self.ok: bool | None = None
        self.subagent_text: str | None = None
        self._subagent: Static | None = None
        self._result = Static("(running…)", markup=False, classes="tool-result")
        self._preview = Static("", markup=False, classes="tool-preview")
        self._preview.display = False
        super().__init__(
            Static(self.args_text, markup=False, classes="tool-args"),
            self._result,
            title=self._title_text(),
            collapsed=True,
        )

    def compose(self) -> Any:
        yield from super().compose()
        yield self._preview

    def preview_text(self) -> str:
        """The head of the result, and how much more there is (empty: nothing yet)."""
        if not self.result_text:
            return ""
        lines = self.result_text.rstrip("\n").splitlines() or [""]
        head = "\n".join(lines[:RESULT_PREVIEW_LINES])
        more = len(lines) - RESULT_PREVIEW_LINES
        if more > 0:
            plural = "s" if more != 1 else ""
            head += f"\n… {more} more line{plural} (click: expand · ctrl+o: full output)"
        return head

    def _show_preview(self) -> None:
        text = self.preview_text()
        self._preview.update(text)
        self._preview.display = bool(text) and self.collapsed

    def _watch_collapsed(self, collapsed: bool) -> None:
        super()._watch_collapsed(collapsed)
        self._show_preview()

    def _title_text(self) -> str:
        preview = " ".join(self.args_text.split())
        if len(preview) > ARGS_PREVIEW:
            preview = preview[: ARGS_PREVIEW - 1] + "…"
        mark = {None: "…", True: "✓", False: "✗"}[self.ok]
        return f"{mark} {self.tool_name} {preview}"

    def set_result(self, content: str, ok: bool) -> None:
        self.result_text = content
        self.ok = ok
        self._result.update(content)
        self.title = self._title_text()
        self._show_preview()

    def show_subagent(self, run: Any) -> None:
        """Render a sub-agent run (``SubAgentRun``) inside this ``branch`` call: its state,
        cost and transcript, kept after it returns so the user can read what it did."""
        cost = f"${run.cost_usd:.4f}" if getattr(run, "cost_known", False) else "$?"
        files = ", ".join(run.changed_paths) if run.changed_paths else "no file changes"
        header = f"sub-agent {run.name} · {run.state} · {cost} · {files}"
        if run.error:
            header += f"\nerror: {run.error}"
        self.subagent_text = "\n".join([header, *run.transcript_lines()])
        if self._subagent is None:
            self._subagent = Static(self.subagent_text, markup=False, classes="tool-subagent")
            self.query_one(Collapsible.Contents).mount(self._subagent)
        else:
            self._subagent.update(self.subagent_text)


def _format_args(args: Any) -> str:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    if isinstance(args, dict):
        if set(args) == {"command"}:
            return str(args["command"])
        return ", ".join(
            f"{k}={v!r}" if not isinstance(v, str) else f"{k}={v}" for k, v in args.items()
        )
    return "" if args is None else repr(args)


class MessageList(VerticalScroll):
    """The scrolling transcript (see the module docstring)."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._assistant: AssistantMessage | None = None
        self._tools: dict[str, ToolCallView] = {}

    # -- building blocks ---------------------------------------------------------------
    def _add(self, widget: Static | Collapsible) -> None:
        follow = self.is_vertical_scroll_end or self.max_scroll_y == 0
        self.mount(widget)
        if follow:
            self.call_after_refresh(self.scroll_end, animate=False)

    def add_user(self, text: str) -> UserMessage:
        self._assistant = None
        widget = UserMessage(text)
        self._add(widget)
        return widget

    def add_notice(self, text: str, severity: str = "information") -> Notice:
        self._assistant = None
        widget = Notice(text, severity)
        self._add(widget)
        return widget

    # -- the TurnSink protocol ----------------------------------------------------------
    def on_text(self, delta: str) -> None:
        if self._assistant is None:
            self._assistant = AssistantMessage()
            self._add(self._assistant)
        self._assistant.append(delta)
        if self.is_vertical_scroll_end:
            self.call_after_refresh(self.scroll_end, animate=False)

    def on_tool_call(self, tool_call_id: str, tool_name: str, args: Any) -> None:
        self._assistant = None
        view = ToolCallView(tool_call_id, tool_name, args)
        self._tools[tool_call_id] = view
        self._add(view)

    def on_tool_result(self, tool_call_id: str, tool_name: str, content: str, ok: bool) -> None:
        view = self._tools.get(tool_call_id)
        if view is None:
            view = ToolCallView(tool_call_id, tool_name, None)
            self._tools[tool_call_id] = view
            self._add(view)
        view.set_result(content, ok)
        self._assistant = None

    def end_turn(self) -> None:
        self._assistant = None

    def on_subagent_event(self, event: Any) -> None:
        """A ``SubAgentBranches`` listener: show the run under the ``branch`` call that
        started it (a nested run shows inside its top-level ancestor's transcript)."""
        run = event.run
        view = self._tools.get(run.tool_call_id or "")
        if view is not None and view.is_mounted:
            view.show_subagent(run)

    # -- whole histories --------------------------------------------------------------------
    def clear_messages(self) -> None:
        self._assistant = None
        self._tools.clear()
        self.remove_children()

    def show_history(self, messages: Iterable[Any]) -> None:
        """Replace the transcript by ``messages`` (pydantic-ai ``ModelMessage`` objects)."""
        self.clear_messages()
        self.append_history(messages)

    def append_history(self, messages: Iterable[Any]) -> None:
        """Add ``messages`` after what is shown (a merged branch's turns), keeping every
        notice and command output already on screen."""
        self._assistant = None
        for message in messages:
            for part in getattr(message, "parts", []):
                kind = getattr(part, "part_kind", "")
                if kind == "user-prompt":
                    content = part.content
                    self.add_user(content if isinstance(content, str) else str(content))
                elif kind == "text" and part.content:
                    self.on_text(part.content)
                    self._assistant = None
                elif kind == "tool-call":
                    self.on_tool_call(part.tool_call_id, part.tool_name, part.args)
                elif kind in ("tool-return", "retry-prompt"):
                    ok = kind == "tool-return" and getattr(part, "outcome", "") != "failed"
                    content = (
                        part.model_response_str()
                        if kind == "tool-return"
                        else (part.model_response())
                    )
                    self.on_tool_result(part.tool_call_id, part.tool_name or "", content, ok)

    # -- inspection (tests, /copy) -------------------------------------------------------
    def transcript(self) -> list[str]:
        """The visible text of every entry, in order."""
        out: list[str] = []
        for child in self.children:
            if isinstance(child, AssistantMessage | Notice):
                out.append(child.text)
            elif isinstance(child, UserMessage):
                out.append(f"> {child.text}")
            elif isinstance(child, ToolCallView):
                out.append(f"tool {child.tool_name}: {child.args_text} -> {child.result_text}")
        return out

    def tool_outputs(self) -> list[tuple[str, str]]:
        """(tool name, whole result) of every finished tool call, oldest first (ctrl+o)."""
        return [
            (child.tool_name, child.result_text)
            for child in self.children
            if isinstance(child, ToolCallView) and child.result_text is not None
        ]

    def last_assistant_text(self) -> str | None:
        for child in reversed(self.children):
            if isinstance(child, AssistantMessage):
                return child.text
        return None
