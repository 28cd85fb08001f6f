"""What the chat feature (the submission queue, parent turns, ``!cmd``, the chat's slash
commands, ``/services``) asks of the chat screen, and :class:`CommandHost`, the screen a
submitted line runs on.

Why protocols: the chat's parts are created by the screen and act on it, so they used to
name ``ChatScreen`` and import the module that imports them (an import cycle). Each names
here only what it uses; the screen satisfies these structurally, and pyright checks that
where it hands itself over (``Submission(self)``, ``ShellRunner(self)``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..common.ports import ScreenHost
from ..fork.ports import ForkHost

if TYPE_CHECKING:
    from textual.timer import Timer

    from ..fork.fork_area import ForkArea
    from ..fork.fork_log import ForkLog
    from .message_list import MessageList


class TaskSlot(Protocol):
    """One task of a kind (a parent turn, a ``!cmd``) that may run at a time."""

    @property
    def running(self) -> bool: ...


class ShellSlot(TaskSlot, Protocol):
    def run(self, command: str) -> None:
        """Run ``!command`` (in the workspace, or in the branch whose tab is in front)."""
        ...


class TurnSlot(TaskSlot, Protocol):
    def start(self, text: str) -> None:
        """A parent chat turn on ``text``."""
        ...

    def save_history(self) -> None:
        """Keep the chat for ``forkdeck --resume``."""
        ...


class ChatHost(ScreenHost, Protocol):
    """The screen the chat's parts run on."""

    last_notice: str
    """The last notice's text (tests and the fork log strip read it)."""

    @property
    def messages(self) -> MessageList: ...

    @property
    def fork_area(self) -> ForkArea | None:
        """The fork's tabs while a fork is shown (a line may go to the tab in front)."""
        ...

    @property
    def fork_log(self) -> ForkLog: ...

    @property
    def turns(self) -> TurnSlot: ...

    @property
    def shell(self) -> ShellSlot: ...

    @property
    def turn_running(self) -> bool: ...

    @property
    def pending(self) -> list[str]:
        """Lines sent before they could run, in order."""
        ...

    def run_pending(self) -> None: ...

    def call_later(self, callback: Callable[[], object]) -> bool: ...

    def set_interval(
        self, interval: float, callback: Callable[[], object] | None = None
    ) -> Timer: ...

    def copy_to_clipboard(self, text: str) -> None: ...

    def request_quit(self) -> None:
        """Quit as ctrl+q does."""
        ...

    def notice_from_thread(self, text: str) -> None:
        """A notice from any thread (a forward opened by a service's thread)."""
        ...


class CommandHost(ChatHost, ForkHost, Protocol):
    """The screen a submitted line runs on: a slash command's handler may be any
    feature's (``app.command_registry``), so it gets every feature's side of the screen."""
