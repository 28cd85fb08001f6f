"""The four forms a submitted line takes once parsed (``app.commands.parse_input``).

Why a module of their own: the command table (``app.command_registry``) types its handlers
with :class:`Slash`, and ``app.commands`` (the parser) reads that table; keeping these
plain values below both means neither imports the other to name them.
``app.commands`` re-exports them, where callers have always found them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slash:
    """``/name args...``"""

    name: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Steer:
    """``>>label message``: steer one running branch (never falls through to the chat)."""

    label: str
    message: str


@dataclass(frozen=True)
class Shell:
    """``!command``: a shell command in the workspace, or on a branch tab in that branch."""

    command: str


@dataclass(frozen=True)
class Prompt:
    """Plain text: a chat turn, or a follow-up turn on the branch tab in front."""

    text: str


Parsed = Slash | Steer | Shell | Prompt
