"""``ChatScreen``: the one screen forkdeck lives on -- chat, and the live fork inside it.

Why this shape: the screen owns the layout, the keys (what Esc, Tab, alt+N do *now*), the
status line and the notices, and nothing else. What a submitted line means is decided in
``app.commands`` and ``app.command_registry``; what it does lives with its feature:
``app.chat`` (the submission queue, parent turns, ``!cmd``, chat commands), ``app.fork``
(the fork view, starting/terminating/aborting/recovering a fork, steering, approvals,
``/fork diff``) and ``app.merge`` (the merge workflow and its modals); the run itself is
``app.session.ChatSession``. Long flows run as workers, so the screen keeps taking keys
while branches stream; ``ctrl+g`` always brings focus back to the input.

The features see this screen only through the protocols they declare (``chat.ports``,
``fork.ports``, ``fork.view.ForkViewHost``, ``merge.ports``, on ``common.ports``): a
feature gets what it asked for, and no module outside ``app.chat`` but the app shell
(``forkdeck_app``, which builds the screen) imports this one
(``tests/app/test_app_structure.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from textual import events, on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widget import Widget

from ..command_registry import REGISTRY
from ..fork.fork_log import ForkLog
from ..fork.view import ALT_DIGIT_GLYPH_KEYS, ForkView, lazy
from ..session import ChatSession
from .chat_input import ChatInput
from .footer import ChatFooter
from .message_list import MessageList
from .shell import ShellRunner
from .status_bar import StatusBar, StatusInfo
from .submission import Submission
from .turns import ParentTurns

if TYPE_CHECKING:
    from ..fork.fork_area import ForkArea
    from ..fork.fork_badge import ForkBadgeWidget

ResultT = TypeVar("ResultT")


class ChatScreen(Screen[None]):
    """Message list, fork area, input with history, status line, footer."""

    CSS_PATH = "screen.tcss"

    BINDINGS = [
        # The footer shows what a key does *now* (check_action hides the others): Tab
        # completes a /command or moves to the next fork tab, Esc clears, stops, terminates
        # or aborts. For each key the first enabled binding wins; the last is the fallback.
        Binding("ctrl+g", "focus_input", "Input", priority=True),
        Binding("tab", "complete", "Complete", priority=True),
        Binding("tab", "cycle_tab", "Next tab", priority=True),
        Binding("tab", "app.focus_next", show=False, priority=True),
        Binding("shift+tab", "cycle_tab(-1)", "Prev tab", priority=True, show=False),
        Binding("shift+tab", "app.focus_previous", show=False, priority=True),
        Binding("escape", "escape('clear')", "Clear"),
        Binding("escape", "escape('stop')", "Stop"),
        Binding("escape", "escape('terminate')", "Terminate branch"),
        Binding("escape", "escape('abort')", "Abort fork"),
        Binding("escape", "escape", show=False),
        Binding("ctrl+pagedown", "cycle_tab", "Next tab", priority=True, show=False),
        Binding("ctrl+pageup", "cycle_tab(-1)", "Prev tab", priority=True, show=False),
        *(Binding(f"f{n}", f"jump({n})", show=False, priority=True) for n in range(1, 10)),
        *(Binding(f"alt+{n}", f"jump({n})", show=False, priority=True) for n in range(1, 10)),
        *(
            Binding(key, f"jump_alt_glyph({n})", show=False, priority=True)
            for n, key in enumerate(ALT_DIGIT_GLYPH_KEYS, start=1)
        ),
        *(Binding(str(n), f"jump({n})", show=False) for n in range(1, 10)),
        Binding("ctrl+q", "app.quit", "Quit", priority=True),
        # issue 13.9: panels scroll and show full tool output from the keyboard
        Binding("pageup", "scroll_view(-1)", show=False, priority=True),
        Binding("pagedown", "scroll_view(1)", show=False, priority=True),
        Binding("ctrl+o", "full_output", "Full output", show=False, priority=True),
        Binding("ctrl+b", "open_forward", "Open in browser", show=False, priority=True),
    ]

    def __init__(self, session: ChatSession) -> None:
        super().__init__()
        self.session = session
        self.last_notice = ""
        self.submission = Submission(self)
        self.turns = ParentTurns(self)
        self.shell = ShellRunner(self)
        self.fork_view = ForkView(self)

    # -- layout --------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        badge: ForkBadgeWidget = lazy("forkdeck.fork.fork_badge", "ForkBadgeWidget")(
            id="fork-badge"
        )
        self._fork_badge = badge
        yield badge
        with Vertical(id="body"):
            yield MessageList(id="messages")
            yield Container(id="fork-slot")
            yield ForkLog(id="fork-log")
        chat_input = ChatInput(id="input", commands=REGISTRY.completions())
        chat_input.cursor_blink = self.cursor_blink
        yield chat_input
        yield StatusBar(id="status")
        yield ChatFooter()

    @property
    def messages(self) -> MessageList:
        return self.query_one("#messages", MessageList)

    @property
    def input(self) -> ChatInput:
        return self.query_one("#input", ChatInput)

    @property
    def status(self) -> StatusBar:
        return self.query_one("#status", StatusBar)

    @property
    def fork_log(self) -> ForkLog:
        return self.query_one("#fork-log", ForkLog)

    @property
    def fork_slot(self) -> Widget:
        """Where the fork view mounts its tabs and panels."""
        return self.query_one("#fork-slot")

    @property
    def fork_area(self) -> ForkArea | None:
        """The fork's tabs and panels while one is shown (see :attr:`fork_view`)."""
        return self.fork_view.area

    def on_mount(self) -> None:
        self.fork_slot.display = False
        self.fork_log.display = False
        self.fork_badge.clear()
        self.input.focus()
        self.refresh_status()
        self.session.on_busy = self.status.set_busy  # spinner + seconds on long waits (13.10)
        self._mounted_app = self.app  # for other threads: no active app there to look up
        # after the first frame: watching forwards loads the sandbox layer
        self.set_timer(1.0, self._watch_forwards)
        if self.session.subagents is not None:
            self._unsubscribe_subagents = self.session.subagents.add_listener(
                self.messages.on_subagent_event
            )

    def _watch_forwards(self) -> None:
        """Forwards opening (``b · web → http://...``) are said in the chat."""
        self._unwatch_forwards = lazy("forkdeck.chat.services", "watch_forwards")(self)

    def on_unmount(self) -> None:
        unwatch = getattr(self, "_unwatch_forwards", None)
        if unwatch is not None:
            unwatch()
        unsubscribe = getattr(self, "_unsubscribe_subagents", None)
        if unsubscribe is not None:
            unsubscribe()

    @property
    def fork_badge(self) -> ForkBadgeWidget:
        return self._fork_badge

    # -- status ---------------------------------------------------------------------------
    def refresh_status(self, activity: str | None = None) -> None:
        session = self.session
        fork = session.fork_totals() if session.fork_active else None
        totals = session.totals
        if activity is None:
            activity = "thinking… (esc stops)" if self.turn_running else ""
            if not session.ready:
                activity = "starting…"
        if self.pending:
            activity = f"{activity} ({len(self.pending)} queued)".strip()
        self.refresh_hints()
        self.status.show(
            StatusInfo(
                model=session.model_label,
                backend=session.backend_label,
                cost_usd=totals.cost_usd + (fork.cost_usd if fork else 0.0),
                input_tokens=totals.input_tokens + (fork.input_tokens if fork else 0),
                output_tokens=totals.output_tokens + (fork.output_tokens if fork else 0),
                activity=activity,
                unpriced=totals.unpriced_responses > 0,
                tokens_estimated=totals.tokens_estimated or bool(fork and fork.tokens_estimated),
            )
        )

    def notice(
        self, text: str, severity: SeverityLevel = "information", *, toast: bool | None = None
    ) -> None:
        """Say something in the transcript (and as a toast, by default for warnings and errors).

        The transcript keeps the whole text; the toast only its first line, because a toast
        that hides the screen for seconds is worse than none. While a fork is open the
        transcript is hidden, so the fork view's log strip gets the text too.
        """
        self.messages.add_notice(text, severity)
        if self.fork_area is not None:
            self.fork_log.add(text, severity)
        self.last_notice = text
        if toast is None:
            toast = severity in ("warning", "error")
        if toast:
            self.notify(text.splitlines()[0], severity=severity, markup=False)

    async def ask(self, modal: Screen[ResultT]) -> ResultT:
        """Show ``modal`` and wait for its answer (``push_screen_wait``)."""
        return await self.app.push_screen_wait(modal)

    @property
    def cursor_blink(self) -> bool:
        """Whether text cursors blink (the app's choice; tests turn it off)."""
        return bool(getattr(self.app, "cursor_blink", True))

    async def until_started(self) -> None:
        """Wait while the app is still preparing the session (``ForkdeckApp.prepared``)."""
        prepared = getattr(self.app, "prepared", None)
        if prepared is not None and not self.session.ready:  # asked before start-up finished
            with self.session.busy("starting"):
                await prepared.wait()

    def copy_to_clipboard(self, text: str) -> None:
        self.app.copy_to_clipboard(text)

    def request_quit(self) -> None:
        """Quit as ctrl+q does (it asks first while branches run)."""
        self.app.call_later(self.app.action_quit)

    def notice_from_thread(self, text: str) -> None:
        """:meth:`notice` from any thread (the app's own one included)."""
        try:
            self._mounted_app.call_from_thread(self.notice, text)
        except RuntimeError:  # called in the app's own thread
            self.notice(text)

    @contextlib.contextmanager
    def busy(self, what: str) -> Iterator[None]:
        """Spinner and elapsed seconds in the status line while ``what`` takes its time.

        The session's busy state is the one source of truth: this only adds a wait to it,
        the same as the session's own (spawning, the judge, a merge waiting on a branch).
        """
        with self.session.busy(what):
            yield

    @property
    def turn_running(self) -> bool:
        return self.turns.running

    @property
    def shell_task(self) -> Any:
        return self.shell.task

    # -- keys -------------------------------------------------------------------------------
    def on_key(self, event: events.Key) -> None:
        """A printable key nobody took (a tab chip or a panel had the focus after a click):
        it belongs in the composer, and so does the focus, so no typed letter is lost."""
        focused = self.focused
        if not event.is_printable or not event.character or focused is self.input:
            return
        if focused is not None and any(
            event.key in node._bindings.key_to_bindings for node in focused.ancestors_with_self
        ):
            return  # a binding takes it (1..9 on the tab strip or here): the app runs it
        event.stop()
        self.input.focus()
        self.input.insert(event.character)

    def action_focus_input(self) -> None:
        self.input.focus()

    def action_complete(self) -> None:
        self.input.complete()

    def action_cycle_tab(self, step: int = 1) -> None:
        if self.fork_area is not None:
            self.fork_area.cycle(step)

    def escape_mode(self) -> str | None:
        """What Esc does now: clear, stop, terminate, abort (None: nothing to do)."""
        if self.focused is self.input and self.input.text:
            return "clear"
        if self.turn_running or self.shell.running:
            return "stop"
        if self.fork_area is not None and self.session.fork_active:
            label = self.fork_area.active_label
            if label is None:
                return "abort"
            coordinator = self.session.coordinator
            live = ("running", "awaiting_approval")
            if coordinator is not None and coordinator.get_branch(label).state in live:
                return "terminate"
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "focus_input":
            return self.focused is not self.input
        if action == "complete":
            return self.focused is self.input and bool(self.input.completions())
        if action == "cycle_tab":
            return self.fork_area is not None
        if action == "escape" and parameters:
            return self.escape_mode() == parameters[0]
        return True

    def refresh_hints(self) -> None:
        """Redraw the footer when what a key does has changed (cheap to call often)."""
        key = (
            self.focused is self.input,
            bool(self.input.text),
            bool(self.input.completions()),
            self.escape_mode(),
            self.fork_area is not None,
        )
        if key != getattr(self, "_hints_key", None):
            self._hints_key = key
            self.refresh_bindings()

    def on_text_area_changed(self, event: Any) -> None:
        self.refresh_hints()

    def on_fork_area_selected(self, event: Any) -> None:
        self.refresh_hints()

    def action_scroll_view(self, pages: int) -> None:
        if self.fork_area is not None:
            self.fork_area.scroll_active(pages)
        else:
            page = self.messages.scroll_page_down if pages > 0 else self.messages.scroll_page_up
            page(animate=False)

    def action_full_output(self) -> None:
        if self.fork_area is not None:
            self.fork_area.open_output()
            return
        # no fork shown: the chat's own tool results, newest first (as on a branch panel)
        from ..common.tool_output import ToolOutput, ToolOutputModal

        outputs = [ToolOutput(name, text) for name, text in self.messages.tool_outputs()]
        if not outputs:
            self.notice("no tool output in the chat yet")
            return
        self.app.push_screen(ToolOutputModal("", outputs))  # "": the chat

    def action_open_forward(self) -> None:
        """``ctrl+b``: the forward of the branch in front (or the only one) in $BROWSER."""
        from .services import open_forward

        open_forward(self)

    def action_jump(self, n: int) -> None:
        if self.fork_area is not None:
            self.fork_area.jump(n)

    def action_jump_alt_glyph(self, n: int) -> None:
        """alt+N as ``¡``/``™``/... (see ALT_DIGIT_GLYPH_KEYS): a jump only during a fork."""
        if self.fork_area is None:
            raise SkipAction()  # no fork: the character is typed into the composer
        self.fork_area.jump(n)

    def action_escape(self, mode: str | None = None) -> None:
        if mode == "clear":
            self.input.value = ""
            return
        if self.shell.stop() or self.turns.stop():
            return
        if self.fork_area is not None and self.session.fork_active:
            from ..fork.lifecycle import confirm_escape

            label = self.fork_area.active_label
            coordinator = self.session.coordinator
            if label is not None and coordinator is not None:
                state = coordinator.get_branch(label).state
                if state not in ("running", "awaiting_approval"):
                    # Nothing to stop: a "Terminate?" dialog here would do nothing (13.13);
                    # say so and go back to the overview.
                    self.notice(f"branch {label} is {state.replace('_', ' ')}: nothing to stop")
                    self.fork_area.select(None)
                    return
            confirm_escape(self, label)

    # -- input -------------------------------------------------------------------------------
    @on(ChatInput.Submitted, "#input")
    def on_submit(self, event: ChatInput.Submitted) -> None:
        # The composer already cleared itself when Enter arrived: keys typed after that
        # Enter are in it now and must stay there.
        self.handle_line(event.value)

    def handle_line(self, text: str) -> None:
        """Run one submitted line (also the entry point for tests, scripts, the palette)."""
        self.submission.handle_line(text)

    @property
    def pending(self) -> list[str]:
        return self.submission.pending

    def run_pending(self) -> None:
        self.submission.run_pending()

    def drop_pending(self, reason: str) -> None:
        self.submission.drop_pending(reason)

    # -- the fork view ---------------------------------------------------------------------
    async def open_fork_view(self, coordinator: Any) -> None:
        await self.fork_view.open(coordinator)

    def close_fork_view(self) -> None:
        self.fork_view.close()

    def offer_recovery(self, open_forks: list[dict[str, Any]]) -> None:
        """A fork an earlier session left open: reopen, merge or abort it (the app asks)."""
        from ..fork.lifecycle import offer_recovery

        offer_recovery(self, open_forks)

    def on_fork_area_approval_requested(self, message: Any) -> None:
        from ..fork.steering import ask_approval

        ask_approval(self, message.label, message.calls)


def config_problem_text(problems: list[Any], path: Path) -> str:
    """The start-up notice for a broken config file: every key and reason, one per line."""
    lines = [f"{path}: problems found; defaults are used for these and the file is untouched:"]
    lines += [f"  {problem.message}" for problem in problems]
    return "\n".join(lines)
