"""Every slash command, declared once: name, arguments, help line, flags and handler.

Why a registry: dispatch, ``/help``, Tab completion in the composer and the command
palette (ctrl+p) all read this one table, so a command cannot be listed but unrunnable, or
runnable but missing from ``/help`` (the screen used to find handlers with
``getattr(self, "cmd_" + name)`` next to a separate table of help lines).

The handlers live with their feature (``app.chat``, ``app.fork``, ``app.merge``) and are
named here as ``"module:function"``, imported on first use: this table is plain data (the
parser and the palette read it without a screen), and a fork or merge module is not loaded
before the first frame just because ``/help`` mentions it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .chat.ports import CommandHost
    from .parsed import Slash

Handler = Callable[["CommandHost", "Slash"], None]
"""What a command runs: the screen it was typed on, and the command with its arguments
(for a sub-command such as ``/fork diff PATH``, the words after the sub-command)."""


@dataclass(frozen=True)
class Args:
    """What may follow a command's name."""

    usage: str = ""
    """Shown after the name in ``/help`` and in a usage error: ``[N]``, ``[PATH]``."""
    most: int | None = 0
    """The most words it takes; None: the handler checks them (and says what is wrong)."""


@dataclass(frozen=True)
class SlashCommand:
    """One slash command (see the module docstring)."""

    name: str
    """``fork``, or ``fork diff`` for a sub-command."""
    summary: str
    handler: str
    """``"module:function"`` of a :data:`Handler`."""
    args: Args = Args()
    during_fork: bool = False
    """Allowed while a fork is open (seed 003's allow-list); anything else would start a
    new parent run under the branches' feet."""
    before_ready: bool = False
    """Runs at once during start-up, never queued (nothing it needs is being built)."""
    setting: bool = False
    """A setting: the palette prefills ``/name `` and also offers the bare command, which
    shows the current value."""

    @property
    def usage(self) -> str:
        return f"/{self.name}" + (f" {self.args.usage}" if self.args.usage else "")

    @property
    def prefill(self) -> bool:
        """The palette puts it into the composer to finish instead of running it."""
        return self.setting or " " in self.name

    def load(self) -> Handler:
        module, _, function = self.handler.partition(":")
        handler: Handler = getattr(importlib.import_module(module), function)
        return handler


@dataclass(frozen=True)
class PaletteEntry:
    """One command palette (ctrl+p) row: ``line`` is run at once, or (``needs_args``) put
    into the composer for the user to finish."""

    title: str
    help: str
    line: str
    needs_args: bool


KEYS_HELP: tuple[tuple[str, str], ...] = (
    ("ctrl+g", "focus the input (from anywhere)"),
    ("tab / shift+tab", "next / previous fork tab (or complete a /command)"),
    ("ctrl+pgdn / ctrl+pgup", "next / previous fork tab"),
    ("F1..F9 / alt+1..9", "jump to branch N (1..9 too when the tab strip has focus)"),
    ("enter", "send; ctrl+j (or shift+enter where the terminal tells it apart): new line"),
    ("esc", "clear the input; else stop a turn or !cmd, terminate a branch, abort the fork"),
    ("up / down", "input history (on the first / last line)"),
    ("ctrl+q", "quit (asks first while branches run)"),
)

INPUT_FORMS: tuple[tuple[str, str], ...] = (
    (">>label message", "steer a running branch of the open fork"),
    (
        "!command",
        "run a shell command (sandboxed) in the workspace, "
        "or on a branch tab in that branch (esc stops it)",
    ),
)
"""The two input forms that are not slash commands, listed by ``/help`` after them."""


class CommandRegistry:
    """The commands in the order ``/help`` and the palette list them."""

    def __init__(self, commands: Iterable[SlashCommand]) -> None:
        self._commands = {c.name: c for c in commands}

    def __iter__(self) -> Iterator[SlashCommand]:
        return iter(self._commands.values())

    def __contains__(self, name: object) -> bool:
        return name in self._commands

    def get(self, name: str) -> SlashCommand | None:
        return self._commands.get(name)

    def names(self) -> list[str]:
        return list(self._commands)

    def completions(self) -> list[str]:
        """What Tab completes ``/`` to in the composer: the top-level names."""
        return [name for name in self._commands if " " not in name]

    def find(self, name: str, args: tuple[str, ...]) -> tuple[SlashCommand, tuple[str, ...]]:
        """The command ``/name args...`` means (a sub-command when its word follows) and the
        arguments it gets; KeyError for a name that is not here."""
        if args:
            sub = self._commands.get(f"{name} {args[0].lower()}")
            if sub is not None:
                return sub, args[1:]
        return self._commands[name], args

    def help_text(self) -> str:
        rows = [(c.usage, c.summary) for c in self] + list(INPUT_FORMS)
        width = max(len(usage) for usage, _ in rows)
        lines = ["Commands:"]
        lines += [f"  {usage.ljust(width)}  {summary}" for usage, summary in rows]
        lines.append("Keys:")
        key_width = max(len(k) for k, _ in KEYS_HELP)
        lines += [f"  {k.ljust(key_width)}  {v}" for k, v in KEYS_HELP]
        return "\n".join(lines)

    def palette_entries(self) -> list[PaletteEntry]:
        entries = []
        for command in self:
            line = f"/{command.name}" + (" " if command.prefill else "")
            entries.append(PaletteEntry(command.usage, command.summary, line, command.prefill))
            if command.setting:  # the bare command shows the current value: a row of its own
                entries.append(
                    PaletteEntry(
                        f"/{command.name}",
                        f"show the current {command.name} setting",
                        line.strip(),
                        False,
                    )
                )
        return entries


_CHAT = "forkdeck.chat.commands"
_FORK = "forkdeck.fork.commands"
_MERGE = "forkdeck.merge.commands"

REGISTRY = CommandRegistry(
    [
        SlashCommand(
            "help",
            "this list of commands and keys",
            f"{_CHAT}:show_help",
            during_fork=True,
            before_ready=True,
        ),
        SlashCommand(
            "fork",
            "open the fork picker and spawn branches from this chat",
            f"{_FORK}:fork",
            args=Args(most=None),
        ),
        SlashCommand(
            "fork diff",
            "open the diff tool on a path (or all paths)",
            f"{_FORK}:fork_diff",
            args=Args("[PATH]", most=1),
            during_fork=True,
        ),
        SlashCommand(
            "merge",
            "pick the winning branch; its files and history are kept",
            f"{_MERGE}:merge",
            during_fork=True,
        ),
        SlashCommand(
            "fork-branches",
            "branch count of the next /fork",
            f"{_CHAT}:setting",
            args=Args("[N]", most=None),
            setting=True,
        ),
        SlashCommand(
            "fork-budget",
            "budgets prefilled into the next /fork",
            f"{_CHAT}:setting",
            args=Args("per-branch USD | aggregate USD | clear", most=None),
            setting=True,
        ),
        SlashCommand(
            "fork-model",
            "model of branch slot I in the next /fork",
            f"{_CHAT}:setting",
            args=Args("I MODEL | I clear | clear", most=None),
            setting=True,
        ),
        SlashCommand(
            "cost",
            "what the chat and the live fork cost so far",
            f"{_CHAT}:show_cost",
            during_fork=True,
        ),
        SlashCommand("tokens", "tokens used so far", f"{_CHAT}:show_tokens", during_fork=True),
        SlashCommand(
            "services",
            "branch services and forwards: start|stop|log NAME [BRANCH], open",
            "forkdeck.chat.services:services",
            args=Args("[start|stop|log NAME [BRANCH] | open [BRANCH]]", most=3),
            during_fork=True,
        ),
        SlashCommand(
            "version",
            "forkdeck and library versions",
            f"{_CHAT}:show_version",
            during_fork=True,
            before_ready=True,
        ),
        SlashCommand(
            "copy",
            "copy the last answer (on a branch tab: that branch's transcript)",
            f"{_CHAT}:copy",
            during_fork=True,
        ),
        SlashCommand("clear", "start a new conversation (not during a fork)", f"{_CHAT}:clear"),
        SlashCommand(
            "quit",
            "leave forkdeck (an open fork is kept for next time)",
            f"{_CHAT}:quit_app",
            during_fork=True,
            before_ready=True,
        ),
    ]
)
"""Every slash command (see the module docstring)."""
