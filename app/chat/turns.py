"""The parent chat's turns: start one, stream it into the transcript, stop it, save it.

Why apart from the screen: a turn is a task with a life of its own (Esc cancels it, lines
typed meanwhile queue behind it, the chat is saved for ``--resume`` when it ends); the
screen only asks whether one is running.
"""

from __future__ import annotations

import asyncio
import contextlib

from textual.css.query import NoMatches

from ..chat_store import save_history
from .one_task import OneTask


class ParentTurns(OneTask):
    """The one parent turn that may run at a time, on ``screen``'s session."""

    what = "a turn"

    def start(self, text: str) -> None:
        screen = self.screen
        if self.refuse_if_running():
            return
        screen.messages.add_user(text)
        self.task = asyncio.create_task(self._turn(text))
        screen.refresh_status()

    async def _turn(self, text: str) -> None:
        screen = self.screen
        session = screen.session
        try:
            await session.run_turn(text, screen.messages)
        except asyncio.CancelledError:
            # Esc, or the app closing under the turn (then there is no screen to tell).
            with contextlib.suppress(NoMatches):
                screen.notice("turn stopped (esc); what happened so far is kept", "warning")
        except Exception as exc:
            from branching_core.agent import describe_error

            screen.notice(
                f"turn failed: {describe_error(exc, session.model, session.history)}", "error"
            )
        finally:
            self.task = None
            self.save_history()
            with contextlib.suppress(NoMatches):
                screen.messages.end_turn()
                screen.refresh_status()
                if screen.pending:
                    screen.call_later(screen.run_pending)

    def save_history(self) -> None:
        """Keep the chat for ``forkdeck --resume`` (a failure is said, never fatal)."""
        session = self.screen.session
        if not session.history:
            return
        try:
            save_history(session.root, session.history)
        except Exception as exc:
            with contextlib.suppress(NoMatches):
                self.screen.notice(f"could not save the chat for --resume: {exc}", "warning")
