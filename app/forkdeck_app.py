"""``ForkdeckApp``: the Textual application around one ``ChatSession``.

Why so little here: the app's jobs are start-up ordering and shutdown. The chat screen is
shown first (no pydantic-ai import before the first frame); then a worker thread prepares
the session (workspace, model, agent), the greeting and any config problems are shown, and
a fork left open by a crashed session is offered for merge or abort. Quitting stops
running branches but keeps an open fork on disk for the next start.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from textual import events
from textual.app import App, SystemCommand
from textual.screen import Screen

from .chat.screen import ChatScreen, config_problem_text
from .commands import PaletteEntry, palette_entries
from .common.type_ahead import TypeAheadGuard
from .gc_freeze import freeze_long_lived, unfreeze
from .session import ChatSession

FIRST_FRAME_ENV = "FORKDECK_FIRST_FRAME_FILE"
"""When set, the app writes ``time.time()`` and whether pydantic-ai was already imported
(``1``/``0``) to this file once the first frame is on screen (``benchmarks/tui.py``)."""


class ForkdeckApp(App[None]):
    """The forkdeck TUI (see the module docstring)."""

    TITLE = "forkdeck"
    ENABLE_COMMAND_PALETTE = True  # ctrl+p: every slash command and setting

    def __init__(
        self,
        session: ChatSession,
        *,
        cursor_blink: bool = True,
        offer_recovery: bool = True,
        resume: bool = False,
    ) -> None:
        super().__init__()
        self.resume = resume
        self.session = session
        self.cursor_blink = cursor_blink
        self.offer_recovery = offer_recovery
        self.chat: ChatScreen | None = None
        self.prepared = asyncio.Event()

    async def on_mount(self) -> None:
        self.chat = ChatScreen(self.session)
        await self.push_screen(self.chat)
        problems = self.session.config_problems
        if problems:
            shown = self.session.settings_store.path.relative_to(self.session.root)
            self.chat.notice(config_problem_text(problems, shown), "error")
        self.call_after_refresh(self._after_first_frame)

    def _after_first_frame(self) -> None:
        """The screen is drawn: only now load pydantic-ai (it would compete for the GIL)."""
        marker = os.environ.get(FIRST_FRAME_ENV)
        if marker:
            loaded = int("pydantic_ai" in sys.modules)
            Path(marker).write_text(f"{time.time():.6f} {loaded}\n", encoding="utf-8")
        if self.offer_recovery:
            # before the (slow) preparation: the manifests on disk are all it needs (24.13)
            self._recovery_early = True
            self.run_worker(self._early_recovery(), name="recovery", group="startup-recovery")
        self.run_worker(self._prepare(), name="prepare", group="startup")

    _recovery_early = False

    async def _early_recovery(self) -> None:
        """Offer a fork a crashed session left open as soon as the screen is up: it took
        11-13 s with a real model server, because it waited for pydantic-ai, the workspace
        and the model; a choice made meanwhile is carried out once the session is ready."""
        chat = self.chat
        if chat is None:
            return
        try:
            forks = await asyncio.to_thread(self.session.forks_left_open_on_disk)
        except Exception as exc:  # an unreadable store: said, never fatal
            chat.notice(f"cannot read the forks left open: {exc}", "error")
            return
        if forks:
            from .fork.lifecycle import offer_recovery

            offer_recovery(chat, forks, at_start=True)

    async def _prepare(self) -> None:
        """Import pydantic-ai and build the agent off the event loop, after the first frame."""
        chat = self.chat
        assert chat is not None
        try:
            notices = await asyncio.to_thread(self.session.prepare)
        except Exception as exc:
            chat.notice(f"cannot open the workspace: {exc}", "error")
            chat.drop_pending("the workspace could not be opened")
            chat.refresh_status("not ready")
            self.prepared.set()
            return
        chat.notice(
            f"forkdeck on {self.session.root.name}/ ({self.session.backend_label} branches): "
            "type a message, /fork to branch this run, /help for commands and keys"
        )
        for notice in notices:
            # The offline greeting is long and expected; only real problems pop up a toast.
            chat.notice(notice.message, notice.severity, toast=notice.severity == "error")
        if self.resume:
            await self._resume(chat)
        chat.refresh_status()
        chat.run_pending()  # lines typed while this was loading, in order
        if self.offer_recovery and not self._recovery_early:
            open_forks = await asyncio.to_thread(self.session.open_forks)
            if open_forks:
                chat.offer_recovery(open_forks)
        freeze_long_lived()  # the model and agent are loaded: out of full collections
        self.prepared.set()

    async def on_event(self, event: events.Event) -> None:
        """A key typed before the dialog in front was shown never answers it (24.13)."""
        if isinstance(event, events.Key):
            screen = self.screen if self._screen_stack else None
            refused = isinstance(screen, TypeAheadGuard) and screen.refuses_key(event)
            self.last_key_time = event.time
            if refused:
                assert isinstance(screen, TypeAheadGuard)
                screen.dropped_key()
                return
        await super().on_event(event)

    last_key_time: float | None = None
    """When the last key reached the app (on the event clock): a dialog that appears in
    the middle of a typing burst does not take that burst's keys as answers."""

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette: Textual's own entries plus every slash command/setting."""
        yield from super().get_system_commands(screen)
        chat = self.chat
        if chat is None:
            return
        for entry in palette_entries():
            yield SystemCommand(entry.title, entry.help, partial(self._palette_run, entry))

    def _palette_run(self, entry: PaletteEntry) -> None:
        chat = self.chat
        if chat is None:
            return
        if entry.needs_args:
            chat.input.value = entry.line  # finish it in the composer, Enter runs it
            chat.input.focus()
        else:
            chat.handle_line(entry.line)

    async def _resume(self, chat: ChatScreen) -> None:
        """``--resume``: the last saved chat becomes the history (and the transcript)."""
        from .chat_store import load_history

        try:
            history = await asyncio.to_thread(load_history, self.session.root)
        except ValueError as exc:
            chat.notice(f"{exc}; starting a new chat", "error")
            return
        if not history:
            chat.notice("--resume: no saved chat on this workspace; starting a new one")
            return
        self.session.history = history
        chat.messages.show_history(history)
        chat.notice(f"resumed the last chat ({len(history)} messages)")

    async def on_unmount(self) -> None:
        """However the app ends (quit, a test's Pilot leaving, an error), the running
        branches and the mirror's watcher stop with it; the fork stays on disk."""
        await self.session.aclose()
        unfreeze()

    async def action_quit(self) -> None:
        """ctrl+q and /quit: ask first while branches run (default No), then stop them.

        The fork itself stays on disk either way and is offered at the next start.
        """
        if self._asking_to_quit:
            return
        running = self.running_branches()
        if running:
            self._asking_to_quit = True
            self.run_worker(self._confirm_quit(running), group="quit", exclusive=True)
            return
        await self.session.aclose()
        self.exit()

    _asking_to_quit = False

    def running_branches(self) -> list[str]:
        coordinator = self.session.coordinator
        if coordinator is None or coordinator.is_resolved:
            return []
        return [
            s.label
            for s in coordinator.inspect_branches()
            if s.state in ("running", "awaiting_approval")
        ]

    async def _confirm_quit(self, running: list[str]) -> None:
        from .common.confirm import ConfirmModal

        question = (
            f"{len(running)} branch(es) still running ({', '.join(running)}). Quit anyway?\n"
            "They are stopped; the fork stays on disk and is offered at the next start."
        )
        try:
            answer = await self.push_screen_wait(ConfirmModal(question, yes_label="Quit"))
        finally:
            self._asking_to_quit = False
        if answer:
            await self.session.aclose()
            self.exit()
