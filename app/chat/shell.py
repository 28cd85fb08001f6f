"""``!cmd`` from the composer: where it runs, its live output, Esc, and the notice after.

Why apart from ``shell_command`` (the engine runner in the right directory, no widget):
this is the screen side of it, the running task the queue waits for and Esc cancels, the
elapsed seconds in the status line, and where the output goes (the transcript, the fork
view's log strip, the branch's panel).
"""

from __future__ import annotations

import asyncio
import contextlib

from .one_task import OneTask
from .shell_command import ShellTarget, branch_target, run_shell_command


class ShellRunner(OneTask):
    """The one ``!cmd`` that may run at a time, on ``screen`` (Esc cancels it: the runner
    kills its whole tree)."""

    what = "a !command"

    def run(self, command: str) -> None:
        """In the parent workspace, or on a branch tab in that branch's sandbox."""
        screen = self.screen
        if self.refuse_if_running():
            return
        area = screen.fork_area
        label = area.active_label if area is not None else None
        coordinator = screen.session.coordinator
        if area is not None and label is not None and coordinator is not None:
            try:
                target = branch_target(coordinator, label)
            except ValueError as exc:
                screen.notice(str(exc), "error")
                return
            area.panel(label).add_note(f"$ {command}")
            coordinator.get_branch(label).user_commands.append(command)  # the process view
        else:
            target = ShellTarget(screen.session.root)
        screen.messages.add_user(f"!{command}")
        self.task = asyncio.create_task(self._run(target, command))

    async def _run(self, target: ShellTarget, command: str) -> None:
        screen = self.screen
        started = asyncio.get_running_loop().time()

        def tick() -> None:
            elapsed = asyncio.get_running_loop().time() - started
            screen.refresh_status(f"!{command[:30]} running {elapsed:.0f} s (esc stops)")

        tick()
        timer = screen.set_interval(0.5, tick)
        live = screen.fork_area is not None
        if live:
            screen.fork_log.add(
                f"$ {command}" + (f"  (branch {target.label})" if target.label else "")
            )
        try:
            text, severity = await run_shell_command(
                target, command, (lambda line: screen.fork_log.add(line)) if live else None
            )
        except asyncio.CancelledError:
            text, severity = f"!{command}: stopped (esc); the command was killed", "warning"
        finally:
            timer.stop()
            self.task = None
            screen.refresh_status()
            if screen.pending:
                screen.call_later(screen.run_pending)
        if target.label is not None and screen.fork_area is not None:
            with contextlib.suppress(KeyError):
                screen.fork_area.panel(target.label).add_note(text)
        if live:
            # the lines were streamed to the strip already: the transcript gets the whole
            # text, the strip only the closing status line
            screen.messages.add_notice(text, severity)
            screen.last_notice = text
            screen.fork_log.add(text.splitlines()[-1], severity)
        else:
            screen.notice(text, severity)
