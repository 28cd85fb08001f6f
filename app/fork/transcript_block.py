"""``TranscriptBlock``: one entry of a branch panel's transcript (a prompt, a reply, a tool
call, a result, a terminal).

Why a module of its own: the branch panel mounts blocks of several kinds, one of them
(``terminal_block.TerminalBlock``, an external agent's terminal) in a module of its own
that the panel loads only when such an agent runs; both build on this base, which
therefore sits below both (they used to import each other).
"""

from __future__ import annotations

from textual.content import Content
from textual.geometry import Size
from textual.widgets import Static

from ..common.redraw import update_in_place


class TranscriptBlock(Static):
    """One entry of a transcript; ``kind`` is prompt/assistant/tool/result/steer/user/error."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(Content(text), classes=f"block -{kind}")
        self.kind = kind
        self.text = text

    def set_text(self, text: str, *, draw: bool = True) -> None:
        """Change the text; ``draw=False`` (a hidden panel) only marks it for
        :meth:`redraw`, so a panel nobody sees never costs a screen layout."""
        self.text = text
        if draw:
            update_in_place(self, Content(text))  # no screen layout while its height holds
            self.stale = False
        else:
            self.stale = True

    def _size_updated(
        self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
    ) -> bool:
        # Textual's default stores a new virtual size as a reactive that asks for *another*
        # screen layout; a block is a leaf (it scrolls nothing), so its size came from the
        # layout now running and that second reflow of the whole screen (every new line of
        # streamed text, every block that grew while its tab was hidden) was pure cost.
        return super()._size_updated(size, virtual_size, container_size, layout=False)

    def redraw(self) -> None:
        if getattr(self, "stale", False):
            self.update(Content(self.text))
            self.stale = False
