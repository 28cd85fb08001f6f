"""The handlers of ``/fork`` and ``/fork diff`` (declared in ``app.command_registry``).

Why here: they decide whether a fork may start now (a turn running, a fork left open by
an earlier session) and hand over to the fork's lifecycle or its diff view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .diff import fork_diff as show_diff
from .lifecycle import offer_recovery, start_fork

if TYPE_CHECKING:
    from ..commands import Slash
    from .ports import ForkHost


def fork(screen: ForkHost, command: Slash) -> None:
    if command.args:
        screen.notice("usage: /fork (or /fork diff [PATH] while a fork is open)", "error")
        return
    if screen.turn_running:
        screen.notice("a turn is running: esc first, then /fork", "warning")
        return
    if left_open := screen.session.open_forks():  # reopen/merge/abort it first (13.7)
        offer_recovery(screen, left_open)
        return
    start_fork(screen)


def fork_diff(screen: ForkHost, command: Slash) -> None:
    show_diff(screen, command.args[0] if command.args else None)
