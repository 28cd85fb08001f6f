"""``ChatScreen``: the one screen forkdeck lives on -- chat, and the live fork inside it.

Why this shape: the screen is a dispatcher. What a line means is decided in
``app.commands``; what it does to the run is done by ``app.session.ChatSession``; the fork
widgets (``ForkArea``, ``ForkBadgeWidget``) and modals (fork picker, confirm, approval,
merge picker, diff explorer) are mounted or pushed here and report back with their results.
Long flows (a turn, a fork, a merge) run as workers, so the screen keeps taking keys while
branches stream; ``ctrl+g`` always brings focus back to the input.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import platform
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from textual import events, on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.screen import Screen

from app.chat_store import save_history
from app.commands import (
    COMMANDS,
    SETTINGS_COMMANDS,
    CommandError,
    Parsed,
    Prompt,
    Shell,
    Slash,
    Steer,
    blocked_reason,
    help_text,
    is_fork_diff,
    parse_input,
    run_settings_command,
)
from app.session import ChatSession, build_report, merge_summary
from app.shell_command import ShellTarget, branch_target, run_shell_command
from app.widgets.chat_input import ChatInput
from app.widgets.edit_notices import EDIT_EVENTS, edit_notice
from app.widgets.footer import ChatFooter
from app.widgets.fork_log import ForkLog
from app.widgets.message_list import MessageList
from app.widgets.status_bar import StatusBar, StatusInfo
from branching_core.errors import ConfigError

ALT_DIGIT_GLYPH_KEYS = (
    "inverted_exclamation_mark",
    "trade_mark_sign",
    "pound_sign",
    "cent_sign",
    "infinity",
    "section_sign",
    "pilcrow_sign",
    "bullet",
    "ª",
)
"""What alt+1..alt+9 arrive as. Terminals that send Alt as an ESC prefix (tmux, screen,
xterm, the VS Code terminal) send ``ESC 1``; Textual's parser maps that to ``¡`` (the
macOS option+1 glyph, as WezTerm sends it), and macOS terminals type the glyph itself.
While a fork is open these keys jump to branch N; otherwise they are typed as text."""


NO_SESSION_COMMANDS = frozenset({"help", "quit", "version"})
"""Slash commands that run at once even during start-up (nothing else is queued behind)."""


def _lazy(module: str, name: str) -> Any:
    """``module.name``, imported on first use: the fork and merge UIs (and pydantic-ai behind
    them) load only when a fork starts, which keeps the first frame fast."""
    return getattr(importlib.import_module(module), name)


class ChatScreen(Screen[None]):
    """Message list, fork area, input with history, status line, footer."""

    CSS_PATH = "chat.tcss"

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
    ]

    def __init__(self, session: ChatSession) -> None:
        super().__init__()
        self.session = session
        self.fork_area: Any = None
        self.turn_task: asyncio.Task[Any] | None = None
        self._remove_listener: Any = None
        self.last_notice = ""
        self.shell_task: asyncio.Task[Any] | None = None
        self.pending: list[str] = []
        """Lines sent before they could run (start-up): run in order once they can."""

    # -- layout --------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        badge_cls = _lazy("app.widgets.fork_badge", "ForkBadgeWidget")
        yield badge_cls(id="fork-badge")
        with Vertical(id="body"):
            yield MessageList(id="messages")
            yield Container(id="fork-slot")
            yield ForkLog(id="fork-log")
        chat_input = ChatInput(id="input", commands=[c for c in COMMANDS if " " not in c])
        chat_input.cursor_blink = bool(getattr(self.app, "cursor_blink", True))
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

    def on_mount(self) -> None:
        self.query_one("#fork-slot").display = False
        self.fork_log.display = False
        self.fork_badge.clear()
        self.input.focus()
        self.refresh_status()
        self.session.on_busy = self.status.set_busy  # spinner + seconds on long waits (13.10)
        if self.session.subagents is not None:
            self._unsubscribe_subagents = self.session.subagents.add_listener(
                self.messages.on_subagent_event
            )

    def on_unmount(self) -> None:
        unsubscribe = getattr(self, "_unsubscribe_subagents", None)
        if unsubscribe is not None:
            unsubscribe()

    @property
    def fork_badge(self) -> Any:
        return self.query_one("#fork-badge")

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

    @contextlib.contextmanager
    def busy(self, what: str) -> Iterator[None]:
        """Spinner and elapsed seconds in the status line while ``what`` takes its time
        (fork spawn, the judge, waiting for a running branch to finish before a merge)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        frames = itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

        def tick() -> None:
            self.refresh_status(f"{next(frames)} {what} {loop.time() - started:.0f} s")

        tick()
        timer = self.set_interval(0.25, tick)
        try:
            yield
        finally:
            timer.stop()
            with contextlib.suppress(NoMatches):
                self.refresh_status()

    @property
    def turn_running(self) -> bool:
        return self.turn_task is not None and not self.turn_task.done()

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
        if self.turn_running or self.shell_running:
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
        if self.shell_task is not None and not self.shell_task.done():
            self.shell_task.cancel()  # the runner kills the command's whole tree
            return
        if self.turn_running:
            assert self.turn_task is not None
            self.turn_task.cancel()
            return
        if self.fork_area is not None and self.session.fork_active:
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
            self.confirm_escape(label)

    @work(exclusive=True, group="escape")
    async def confirm_escape(self, label: str | None) -> None:
        confirm_cls = _lazy("app.modals.confirm", "ConfirmModal")
        coordinator = self.session.coordinator
        if coordinator is None:
            return
        if label is not None and coordinator.get_branch(label).state != "running":
            self.fork_area.select(None)  # 13.13: nothing to terminate: back to the overview
            return
        question = f"Terminate branch {label}?" if label else "Abort the entire fork?"
        if not await self.app.push_screen_wait(confirm_cls(question)):
            return
        if label is None:
            ids = await self.session.abort_fork()
            self.close_fork_view()
            self.notice(f"fork aborted: {len(ids)} branches discarded, no file changed")
        else:
            status = await coordinator.terminate_branch(label)
            self.notice(f"branch {label}: {status.state}")
        self.refresh_status()

    # -- input -------------------------------------------------------------------------------
    @on(ChatInput.Submitted, "#input")
    def on_submit(self, event: ChatInput.Submitted) -> None:
        # The composer already cleared itself when Enter arrived: keys typed after that
        # Enter are in it now and must stay there.
        self.handle_line(event.value)

    def handle_line(self, text: str) -> None:
        """Run one submitted line (also the entry point for tests and scripts)."""
        try:
            parsed = parse_input(text)
        except CommandError as exc:
            self.notice(str(exc), "error")
            return
        if parsed is None:
            return
        wait = self._must_wait(parsed)
        if wait is not None:
            # Start-up (pydantic-ai imports, the agent is built), a turn or !cmd still
            # running, or earlier lines still queued: keep the order, say so, run it later.
            self.pending.append(text)
            self.notice(f"queued until {wait}: {text.splitlines()[0]}")
            self.refresh_status()
            return
        self._run_parsed(parsed)

    def _run_parsed(self, parsed: Parsed) -> None:
        on_branch = self.fork_area is not None and self.fork_area.active_label is not None
        reason = blocked_reason(
            parsed, fork_active=self.session.fork_active, on_branch_tab=on_branch
        )
        if reason is not None:
            self.notice(reason, "warning")
            return
        self.dispatch(parsed)

    @property
    def shell_running(self) -> bool:
        return self.shell_task is not None and not self.shell_task.done()

    def _must_wait(self, parsed: Parsed) -> str | None:
        """Why ``parsed`` has to wait in the queue (None: it runs now)."""
        if isinstance(parsed, Slash) and parsed.name in NO_SESSION_COMMANDS:
            return None
        if not self.session.ready:
            return "the model is ready"
        if self.pending:
            return "the lines before it have run"
        if isinstance(parsed, Shell) and self.shell_running:
            return "the running !command ends"
        if isinstance(parsed, Prompt) and self.turn_running:
            return "the running turn ends"
        return None

    def run_pending(self) -> None:
        """Run queued lines in order; each waits for the turn or !command before it."""
        while self.pending and self.session.ready:
            if self.turn_running or self.shell_running:
                break
            parsed = parse_input(self.pending.pop(0))
            if parsed is not None:
                self._run_parsed(parsed)
        self.refresh_status()

    def drop_pending(self, reason: str) -> None:
        if self.pending:
            self.notice(f"{len(self.pending)} queued line(s) not sent: {reason}", "error")
            self.pending.clear()

    def dispatch(self, parsed: Parsed) -> None:
        if isinstance(parsed, Slash):
            self.run_slash(parsed)
        elif isinstance(parsed, Steer):
            self.steer(parsed)
        elif isinstance(parsed, Shell):
            self.run_shell(parsed.command)
        elif isinstance(parsed, Prompt):
            if self.session.fork_active and self.fork_area is not None:
                self.branch_follow_up(self.fork_area.active_label, parsed.text)
            else:
                self.start_turn(parsed.text)

    # -- the parent chat -------------------------------------------------------------------
    def start_turn(self, text: str) -> None:
        if self.turn_running:
            self.notice("a turn is running: wait for it, or esc to stop it", "warning")
            return
        self.messages.add_user(text)
        self.turn_task = asyncio.create_task(self._turn(text))
        self.refresh_status()

    async def _turn(self, text: str) -> None:
        try:
            await self.session.run_turn(text, self.messages)
        except asyncio.CancelledError:
            # Esc, or the app closing under the turn (then there is no screen to tell).
            with contextlib.suppress(NoMatches):
                self.notice("turn stopped (esc); what happened so far is kept", "warning")
        except Exception as exc:
            from branching_core.agent.model_errors import describe_error

            self.notice(
                f"turn failed: {describe_error(exc, self.session.model, self.session.history)}",
                "error",
            )
        finally:
            self.turn_task = None
            self.save_history()
            with contextlib.suppress(NoMatches):
                self.messages.end_turn()
                self.refresh_status()
                if self.pending:
                    self.call_later(self.run_pending)

    def save_history(self) -> None:
        """Keep the chat for ``forkdeck --resume`` (a failure is said, never fatal)."""
        if not self.session.history:
            return
        try:
            save_history(self.session.root, self.session.history)
        except Exception as exc:
            with contextlib.suppress(NoMatches):
                self.notice(f"could not save the chat for --resume: {exc}", "warning")

    def run_shell(self, command: str) -> None:
        """``!cmd``: in the parent workspace, or on a branch tab in that branch's sandbox."""
        if self.shell_task is not None and not self.shell_task.done():
            self.notice("a !command is running: wait for it, or esc to stop it", "warning")
            return
        area = self.fork_area
        label = area.active_label if area is not None else None
        if area is not None and label is not None and self.session.coordinator is not None:
            try:
                target = branch_target(self.session.coordinator, label)
            except ValueError as exc:
                self.notice(str(exc), "error")
                return
            area.panel(label).add_note(f"$ {command}")
        else:
            target = ShellTarget(self.session.root)
        self.messages.add_user(f"!{command}")
        self.shell_task = asyncio.create_task(self._shell(target, command))

    async def _shell(self, target: ShellTarget, command: str) -> None:
        started = asyncio.get_running_loop().time()

        def tick() -> None:
            elapsed = asyncio.get_running_loop().time() - started
            self.refresh_status(f"!{command[:30]} running {elapsed:.0f} s (esc stops)")

        tick()
        timer = self.set_interval(0.5, tick)
        live = self.fork_area is not None
        if live:
            self.fork_log.add(
                f"$ {command}" + (f"  (branch {target.label})" if target.label else "")
            )
        try:
            text, severity = await run_shell_command(
                target, command, (lambda line: self.fork_log.add(line)) if live else None
            )
        except asyncio.CancelledError:
            text, severity = f"!{command}: stopped (esc); the command was killed", "warning"
        finally:
            timer.stop()
            self.shell_task = None
            self.refresh_status()
            if self.pending:
                self.call_later(self.run_pending)
        if target.label is not None and self.fork_area is not None:
            with contextlib.suppress(KeyError):
                self.fork_area.panel(target.label).add_note(text)
        if live:
            # the lines were streamed to the strip already: the transcript gets the whole
            # text, the strip only the closing status line
            self.messages.add_notice(text, severity)
            self.last_notice = text
            self.fork_log.add(text.splitlines()[-1], severity)
        else:
            self.notice(text, severity)

    # -- slash commands ---------------------------------------------------------------------
    def run_slash(self, command: Slash) -> None:
        name = command.name
        if name in SETTINGS_COMMANDS:
            try:
                self.notice(run_settings_command(self.session.settings_store, command))
            except (CommandError, ConfigError) as exc:
                self.notice(str(exc), "error")
            return
        if is_fork_diff(command):
            self.fork_diff(command.args[1] if len(command.args) > 1 else None)
            return
        handler = getattr(self, f"cmd_{name.replace('-', '_')}", None)
        if handler is None:
            self.notice(f"/{name} is not available here", "error")
            return
        handler(command)

    def cmd_help(self, command: Slash) -> None:
        self.notice(help_text())

    def cmd_cost(self, command: Slash) -> None:
        totals = self.session.totals
        lines = [f"chat: ${totals.cost_usd:.4f} over {totals.requests} requests"]
        if totals.unpriced_responses:
            lines.append(
                f"  ({totals.unpriced_responses} responses of a model with no known price)"
            )
        coordinator = self.session.coordinator
        if coordinator is not None and self.session.fork_active:
            summary = coordinator.fork_cost()
            agg = (
                "price unknown"
                if summary.aggregate_usd is None
                else f"${summary.aggregate_usd:.4f}"
            )
            cap = summary.aggregate_budget_usd
            lines.append(f"fork {summary.fork_id}: {agg}" + (f" of ${cap:.2f}" if cap else ""))
            for branch in summary.branches:
                spent = (
                    "price unknown"
                    if branch.cumulative_usd is None
                    else f"${branch.cumulative_usd:.4f}"
                )
                budget = f" / ${branch.budget_usd:.2f}" if branch.budget_usd else ""
                lines.append(f"  {branch.label}: {spent}{budget} ({branch.requests} requests)")
        self.notice("\n".join(lines))

    def cmd_tokens(self, command: Slash) -> None:
        totals = self.session.totals
        fork = self.session.fork_totals() if self.session.fork_active else None
        line = f"chat: {totals.input_tokens:,} in / {totals.output_tokens:,} out"
        if fork is not None:
            line += f"; fork: {fork.input_tokens:,} in / {fork.output_tokens:,} out"
        self.notice(line)

    def cmd_version(self, command: Slash) -> None:
        from importlib import metadata  # not at import: it costs the first frame ~15 ms

        def version(dist: str) -> str:
            try:
                return metadata.version(dist)
            except metadata.PackageNotFoundError:
                return "?"

        self.notice(
            f"forkdeck {version('forkdeck')} · pydantic-ai {version('pydantic-ai-slim')} · "
            f"textual {version('textual')} · python {platform.python_version()}"
        )

    def cmd_copy(self, command: Slash) -> None:
        """The chat's last answer; on a branch tab, that branch's whole transcript."""
        area = self.fork_area
        label = area.active_label if area is not None else None
        if area is not None and label is not None:
            panel = area.panel(label)
            text, what = panel.transcript_text + panel.pending_text, f"branch {label}'s transcript"
        else:
            text, what = self.messages.last_assistant_text(), "the last answer"
        if not text:
            self.notice("nothing to copy yet", "warning")
            return
        self.app.copy_to_clipboard(text)
        self.notice(f"copied {what}: {len(text)} characters", toast=True)

    def cmd_clear(self, command: Slash) -> None:
        if self.turn_running:
            self.notice("a turn is running: esc first", "warning")
            return
        self.session.history = []
        self.messages.clear_messages()
        if (self.session.root / ".pydantic-deep" / "sessions").exists():
            save_history(self.session.root, [])  # --resume starts from the new one too
        self.notice("new conversation")

    def cmd_quit(self, command: Slash) -> None:
        self.app.call_later(self.app.action_quit)

    def cmd_fork(self, command: Slash) -> None:
        if command.args:
            self.notice("usage: /fork (or /fork diff [PATH] while a fork is open)", "error")
            return
        if self.turn_running:
            self.notice("a turn is running: esc first, then /fork", "warning")
            return
        if left_open := self.session.open_forks():  # reopen/merge/abort it first (13.7)
            self.offer_recovery(left_open)
            return
        self.fork_flow()

    def cmd_merge(self, command: Slash) -> None:
        if not self.session.fork_active:
            self.notice("no fork is open: /fork first", "warning")
            return
        self.merge_flow()

    # -- forks ------------------------------------------------------------------------------
    @work(exclusive=True, group="fork")
    async def fork_flow(self) -> None:
        picker_cls = _lazy("app.modals.fork_picker", "ForkPickerModal")
        settings = self.session.settings
        request = await self.app.push_screen_wait(
            picker_cls(
                settings.fork_branch_count,
                settings,
                default_model=self.session.model_label,
                cursor_blink=bool(getattr(self.app, "cursor_blink", True)),
                budget_note=self.session.budget_note(),
                estimator=_lazy("app.review.fork_estimate", "estimator_for")(self.session),
            )
        )
        if request is None:
            self.notice("fork cancelled")
            return
        try:
            with self.busy(f"starting {len(request.specs)} branches…"):
                coordinator = await self.session.start_fork(
                    list(request.specs), request.aggregate_budget_usd
                )
        except Exception as exc:
            self.notice(f"fork failed: {exc}", "error")
            return
        await self.open_fork_view(coordinator)
        labels = ", ".join(spec.label for spec in request.specs)
        self.notice(f"forked {len(request.specs)} branches: {labels}")

    async def open_fork_view(self, coordinator: Any) -> None:
        """Show the fork: tabs + panels in place of the transcript, badge on top."""
        area_cls = _lazy("app.widgets.fork_area", "ForkArea")
        slot = self.query_one("#fork-slot")
        self.fork_area = area_cls(coordinator, id="fork-area")
        await slot.mount(self.fork_area)
        slot.display = True
        self.fork_log.clear()
        self.fork_log.display = True
        self.input.passthrough_keys = frozenset(ALT_DIGIT_GLYPH_KEYS)
        self.messages.display = False
        self.fork_badge.set_coordinator(coordinator)
        self._remove_listener = coordinator.add_listener(self._on_fork_event)
        self.refresh_status()
        self.input.focus()

    def close_fork_view(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        if self.fork_area is not None:
            self.fork_area.remove()
            self.fork_area = None
        self.query_one("#fork-slot").display = False
        self.fork_log.display = False
        self.input.passthrough_keys = frozenset()
        self.messages.display = True
        self.fork_badge.set_coordinator(None)
        self.refresh_status()

    def _on_fork_event(self, event: Any) -> None:
        # Runs inside the coordinator's publish: only cheap work here.
        # Called for every streamed token of every branch: the cheap name test comes first;
        # not attached means the app is shutting down while branches still report.
        watched = ("BranchCostUpdated", "BranchStateChanged")
        if type(event).__name__ in watched and self.is_attached:
            self.refresh_status()
        elif type(event).__name__ in EDIT_EVENTS and self.is_attached:
            line = edit_notice(event)  # the user's own edits in a branch's mirror (17.2)
            if line is not None:
                self.notice(*line)

    def steer(self, command: Steer) -> None:
        coordinator = self.session.coordinator
        assert coordinator is not None
        labels = [status.label for status in coordinator.inspect_branches()]
        if command.label not in labels:
            self.notice(
                f"no branch {command.label!r} in this fork; branches: {', '.join(labels)}",
                "error",
            )
            return
        try:
            coordinator.steer(command.label, command.message)
        except RuntimeError:
            self.notice(
                f"branch {command.label} is not running: select its tab "
                f"(alt+{labels.index(command.label) + 1}) and type to start a new turn there",
                "warning",
            )
            return
        self.notice(f">>{command.label}: {command.message}", toast=True)

    @work(group="branch-turn")
    async def branch_follow_up(self, label: str | None, text: str) -> None:
        coordinator = self.session.coordinator
        if coordinator is None or label is None:
            return
        state = coordinator.get_branch(label).state
        if state == "running":
            self.notice(
                f"branch {label} is still running: wait for it, or steer it with >>{label} {text}",
                "warning",
            )
            return
        if self.fork_area is not None:
            self.fork_area.add_user_message(label, text)
        try:
            await coordinator.run_on_branch(label, text)
        except RuntimeError as exc:
            self.notice(str(exc), "error")

    def on_fork_area_approval_requested(self, message: Any) -> None:
        self.approval_flow(message.label, message.calls)

    @work(group="approval")
    async def approval_flow(self, label: str, calls: Any) -> None:
        modal_cls = _lazy("app.modals.approval", "ApprovalModal")
        coordinator = self.session.coordinator
        if coordinator is None:
            return
        decisions = await self.app.push_screen_wait(modal_cls(label, calls))
        if decisions is None:
            return
        approve = getattr(coordinator, "approve", None)
        if approve is None:
            self.notice("this coordinator cannot take approvals", "error")
            return
        await approve(label, decisions)
        approved = sum(1 for ok in decisions.values() if ok)
        self.notice(f"branch {label}: {approved} of {len(decisions)} tool calls approved")

    # -- merge ------------------------------------------------------------------------------
    @work(exclusive=True, group="merge")
    async def merge_flow(self) -> None:
        """``/merge``: the picker, or (strategy not ``manual``) the judge and its verdict first."""
        coordinator = self.session.coordinator
        assert coordinator is not None
        handle = coordinator.handle
        strategy = handle.merge_strategy.kind if handle is not None else "manual"
        preselect: str | None = None
        subtitle: str | None = None
        outcome: Any = None
        if strategy != "manual":
            outcome = await self._judge(coordinator)
            if outcome is not None and outcome.committed:
                await self._after_merge(self.session.adopt_merge(outcome.merge_result))
                return
            if outcome is not None and outcome.auto_eligible:
                decision = await self._acceptance(outcome)
                if decision is None:
                    self.notice("merge cancelled: the fork stays open")
                    await self._judge_decided(outcome, None)
                    return
                if decision == "accept":
                    await self.apply_merge(f"pick:{outcome.winner_label}")
                    await self._judge_decided(outcome, f"pick:{outcome.winner_label}")
                    return
            if outcome is not None:
                preselect = outcome.winner_label
                verdict = outcome.verdict
                subtitle = outcome.fallback_reason or (verdict.rationale if verdict else None)
        action = await self.pick_winner(preselect=preselect, subtitle=subtitle)
        if action is None:
            self.notice("merge cancelled: the fork stays open")
        elif _lazy("app.review.combine_flow", "is_merge_result")(action):  # 17.1: combined
            await self._after_merge(action)
        else:
            await self.apply_merge(action)
        await self._judge_decided(outcome, action)

    async def _judge_decided(self, outcome: Any, choice: Any) -> None:
        """17.6: accept/override/cancel of the judge's pick goes to the judge log."""
        warning = await _lazy("app.review.judge_record", "judge_decided")(
            self.session, outcome, choice
        )
        if warning is not None:
            self.notice(warning, "warning")

    async def pick_winner(
        self, *, preselect: str | None = None, subtitle: str | None = None
    ) -> Any:
        """``"pick:<label>"``, ``None``, or a combined merge's ``MergeResult`` (17.1)."""
        picker_cls = _lazy("app.modals.merge_picker", "MergePickerModal")
        coordinator = self.session.coordinator
        if coordinator is None:
            self.notice("no fork is open: /fork first", "warning")
            return None
        try:
            report = await build_report(self.session)
        except Exception as exc:
            self.notice(f"cannot build the diff report: {exc}", "error")
            return None
        statuses = coordinator.inspect_branches()
        return await self.app.push_screen_wait(
            picker_cls(
                report,
                statuses,
                difftool=self.session.settings.difftool,
                paths=self._diff_paths(),
                preselect=preselect,
                subtitle=subtitle,
                coordinator=coordinator,  # live columns, "s" stop+merge (13.11, 13.10)
                branch_tests=self.session.branch_tests,
                test_command=self.session.settings.test_command,
                combiner=_lazy("app.review.combine_flow", "live_combiner")(self.session),
                detected_tests=await _lazy("app.review.detected_tests", "session_tests")(
                    self.session
                ),  # 17.4
            )
        )

    def _diff_paths(self) -> Any:
        return self.session.diff_paths()  # the fork's live mirror (issue 13.6)

    async def _judge(self, coordinator: Any) -> Any:
        """Run ``branching_core.review.resolve``; None (and a notice) when it cannot decide."""
        if (reason := self.session.judge_unavailable()) is not None:  # 13.24
            self.notice(reason, "warning")
            return None
        self.notice("asking the judge… (the branches are awaited first)")
        try:
            return await self.session.run_judge()
        except Exception as exc:
            self.notice(f"the judge failed ({exc}): pick the winner yourself", "warning")
            return None

    async def _acceptance(self, outcome: Any) -> str | None:
        """``accept`` / ``override`` / None from T3's acceptance modal (it handles ``d``)."""
        modal_cls = _lazy("app.widgets.merge_acceptance", "MergeAcceptanceModal")
        coordinator = self.session.coordinator
        statuses = coordinator.inspect_branches() if coordinator is not None else []
        return await self.app.push_screen_wait(
            modal_cls(
                outcome,
                statuses=statuses,
                paths=self._diff_paths(),
                difftool=self.session.settings.difftool,
            )
        )

    async def apply_merge(self, action: str) -> None:
        label = action.partition(":")[2]
        coordinator = self.session.coordinator
        if coordinator is not None:
            with contextlib.suppress(ValueError):
                if coordinator.get_branch(label).state == "running":
                    self.notice(f"waiting for branch {label} to finish…")
        try:
            with self.busy(f"merging {label}…"):
                result = await self.session.merge(action)
        except Exception as exc:
            self.notice(f"merge failed: {exc}", "error")
            return
        await self._after_merge(result)

    async def _after_merge(self, result: Any) -> None:
        self.close_fork_view()
        self.save_history()
        if result is None:
            return
        # Append the winner's new turns: notices and command output stay (issue 13.12).
        self.messages.append_history(self.session.merged_messages)
        self.notice(*merge_summary(result))

    # -- diffs --------------------------------------------------------------------------------
    @work(group="diff")
    async def fork_diff(self, path: str | None) -> None:
        await self.fork_diff_now(path)

    async def fork_diff_now(self, path: str | None) -> None:
        """``/fork diff [PATH]``: the external diff tool when one is detected, else the explorer."""
        launch = _lazy("app.widgets.merge_diff", "launch_difftool")
        explorer_cls = _lazy("app.screens.diff_explorer", "DiffExplorerScreen")
        try:
            report = await build_report(self.session, [path] if path else None)
        except Exception as exc:
            self.notice(f"cannot build the diff report: {exc}", "error")
            return
        if path is not None and not any(e.path == path and e.touched_by for e in report.paths):
            self.notice(f"no branch touched {path}", "warning")
            return
        paths = self._diff_paths()
        difftool = self.session.settings.difftool
        coordinator = self.session.coordinator
        source = "app.review.detected_tests"  # 17.4: which test command the review runs
        tests = _lazy(source, "describe_tests")(await _lazy(source, "session_tests")(self.session))
        self.notice(tests)
        if paths is not None and coordinator is not None:  # a mirror exists only for a fork
            labels = [s.label for s in coordinator.inspect_branches()]
            if path is not None:
                entry = next(e for e in report.paths if e.path == path and e.touched_by)
                parent, branch_files = paths.for_entry(entry, labels)
            else:
                parent, branch_files = paths.parent, [paths.branches[k] for k in paths.branches]
            try:
                outcome = launch(parent, branch_files, difftool=difftool)
            except Exception as exc:
                self.notice(f"cannot start the diff tool: {exc}", "error")
                return
            if not outcome.wants_tui:
                self.notice(f"opened {outcome.kind} diff tool")
                return
        flow = "app.review.combine_flow"  # 17.1/17.3: combine and process view
        result = await self.app.push_screen_wait(
            explorer_cls(
                report,
                paths=paths,
                difftool=difftool,
                initial_path=path,
                combiner=_lazy(flow, "live_combiner")(self.session),
                process=_lazy(flow, "process_source")(self.session),
                tests_line=tests,
            )
        )
        if _lazy(flow, "is_merge_result")(result):
            await self._after_merge(result)

    # -- start-up recovery --------------------------------------------------------------------
    @work(group="recover")
    async def offer_recovery(self, open_forks: list[dict[str, Any]]) -> None:
        modal_cls = _lazy("app.modals.recover_fork", "RecoverForkModal")
        choice = await self.app.push_screen_wait(modal_cls(open_forks))
        if choice is None:
            self.notice("the open fork is kept; you will be asked again next time")
            return
        coordinator = await asyncio.to_thread(self.session.adopt_recovered, choice[1])
        if coordinator is None:
            self.notice(f"fork {choice[1]} could not be recovered", "error")
            return
        for problem in coordinator.recovery_errors:
            self.notice(problem, "warning")
        if choice[0] == "abort":
            await self.session.abort_fork()
            self.notice(f"fork {choice[1]} aborted; no file changed")
            return
        if choice[0] == "merge" and len(choice) > 2 and choice[2]:
            await self.apply_merge(f"pick:{choice[2]}")
            if not self.session.fork_active:
                return  # merged; else (a conflict) the fork is shown, still open
        await self.open_fork_view(coordinator)
        self.notice(f"fork {choice[1]} reopened: /merge to pick a winner")


def config_problem_text(problems: list[Any], path: Path) -> str:
    """The start-up notice for a broken config file: every key and reason, one per line."""
    lines = [f"{path}: problems found; defaults are used for these and the file is untouched:"]
    lines += [f"  {problem.message}" for problem in problems]
    return "\n".join(lines)
