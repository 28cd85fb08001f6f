"""The handler of ``/merge`` (declared in ``app.command_registry``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .screen_flow import start_merge

if TYPE_CHECKING:
    from ..commands import Slash
    from .ports import MergeHost


def merge(screen: MergeHost, command: Slash) -> None:
    if not screen.session.fork_active:
        screen.notice("no fork is open: /fork first", "warning")
        return
    start_merge(screen)
