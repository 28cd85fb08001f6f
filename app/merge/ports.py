"""What the merge feature asks of the chat screen: its modals and notices (through
:class:`app.common.ports.ScreenHost`), and what a merge changes on it afterwards (the fork
view closes, the chat is saved for ``--resume``, the winner's turns join the transcript).

Why a protocol: ``/merge`` and a recovered fork's merge run on any screen that has these,
and the merge package never imports the chat screen (which imports every feature).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from ..common.ports import ScreenHost

if TYPE_CHECKING:
    from ..fork.view import ForkView


class HistoryKeeper(Protocol):
    """The parent chat's turns, as far as a merge is concerned."""

    def save_history(self) -> None:
        """Keep the chat (now the winner's conversation) for ``forkdeck --resume``."""
        ...


class Transcript(Protocol):
    """The chat's transcript, as far as a merge is concerned."""

    def append_history(self, messages: Iterable[object]) -> None:
        """Show the winner's new turns after what the chat already shows."""
        ...


class MergeHost(ScreenHost, Protocol):
    """The screen a merge runs on (``app.merge.screen_flow``)."""

    @property
    def fork_view(self) -> ForkView: ...

    @property
    def turns(self) -> HistoryKeeper: ...

    @property
    def messages(self) -> Transcript: ...
