"""What a submitted line does: parse it, queue it while it must wait, refuse it during a
fork when it is not allowed, else hand it to the feature that runs it.

Why apart from the screen: the order rules (start-up, a running turn or ``!cmd``, earlier
lines still queued) and the dispatch table are one concern, tested through the composer;
slash commands are looked up in ``app.command_registry``, never by method name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..commands import (
    BEFORE_READY,
    CommandError,
    Parsed,
    Prompt,
    Shell,
    Slash,
    Steer,
    blocked_reason,
    parse_input,
    resolve,
)

if TYPE_CHECKING:
    from .ports import CommandHost


class Submission:
    """Lines from the composer (or the palette, or a test) in the order they were sent."""

    def __init__(self, screen: CommandHost) -> None:
        self.screen = screen
        self.pending: list[str] = []
        """Lines sent before they could run (start-up): run in order once they can."""

    def handle_line(self, text: str) -> None:
        """Run one submitted line, or queue it (and say so) when it has to wait."""
        screen = self.screen
        try:
            parsed = parse_input(text)
        except CommandError as exc:
            screen.notice(str(exc), "error")
            return
        if parsed is None:
            return
        wait = self.must_wait(parsed)
        if wait is not None:
            # Start-up (pydantic-ai imports, the agent is built), a turn or !cmd still
            # running, or earlier lines still queued: keep the order, say so, run it later.
            self.pending.append(text)
            screen.notice(f"queued until {wait}: {text.splitlines()[0]}")
            screen.refresh_status()
            return
        self.run_parsed(parsed)

    def must_wait(self, parsed: Parsed) -> str | None:
        """Why ``parsed`` has to wait in the queue (None: it runs now)."""
        screen = self.screen
        if isinstance(parsed, Slash) and parsed.name in BEFORE_READY:
            return None
        if not screen.session.ready:
            return "the model is ready"
        if self.pending:
            return "the lines before it have run"
        if isinstance(parsed, Shell) and screen.shell.running:
            return "the running !command ends"
        if isinstance(parsed, Prompt) and screen.turn_running:
            return "the running turn ends"
        return None

    def run_pending(self) -> None:
        """Run queued lines in order; each waits for the turn or !command before it."""
        screen = self.screen
        while self.pending and screen.session.ready:
            if screen.turn_running or screen.shell.running:
                break
            parsed = parse_input(self.pending.pop(0))
            if parsed is not None:
                self.run_parsed(parsed)
        screen.refresh_status()

    def drop_pending(self, reason: str) -> None:
        if self.pending:
            self.screen.notice(f"{len(self.pending)} queued line(s) not sent: {reason}", "error")
            self.pending.clear()

    def run_parsed(self, parsed: Parsed) -> None:
        screen = self.screen
        area = screen.fork_area
        on_branch = area is not None and area.active_label is not None
        reason = blocked_reason(
            parsed, fork_active=screen.session.fork_active, on_branch_tab=on_branch
        )
        if reason is not None:
            screen.notice(reason, "warning")
            return
        self.dispatch(parsed)

    def dispatch(self, parsed: Parsed) -> None:
        screen = self.screen
        if isinstance(parsed, Slash):
            self.run_slash(parsed)
        elif isinstance(parsed, Steer):
            from ..fork.steering import steer

            steer(screen, parsed)
        elif isinstance(parsed, Shell):
            screen.shell.run(parsed.command)
        elif screen.session.fork_active and screen.fork_area is not None:
            from ..fork.steering import branch_follow_up

            branch_follow_up(screen, screen.fork_area.active_label, parsed.text)
        else:
            screen.turns.start(parsed.text)

    def run_slash(self, command: Slash) -> None:
        """The registered handler, with the arguments it takes (else a one-line error)."""
        try:
            spec, args = resolve(command)
        except CommandError as exc:
            self.screen.notice(str(exc), "error")
            return
        spec.load()(self.screen, args)
