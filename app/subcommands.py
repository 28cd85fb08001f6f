"""Every ``forkdeck`` subcommand in one place: the ``--help`` listing and typo suggestions.

The names are ``command_names.HEADLESS_COMMANDS`` (one line per command, the dispatch table) and the
one-line descriptions are the ``help=`` of each subparser in
``branching_core.cli.build_parser``; so a new subcommand that adds its name there and its
parser to the CLI shows up in ``forkdeck --help`` and in "did you mean" without touching
this module. Only imported for ``--help`` and for a first word that is neither a command
nor a directory: the TUI's first frame does not pay for it.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable

from .command_names import HEADLESS_COMMANDS

#: One-line descriptions for commands the CLI parser does not describe (a command handled
#: by the app itself, say). The parser's ``help=`` wins where both exist.
EXTRA_HELP: dict[str, str] = {
    "demo": "a throwaway project with a failing test, forked three ways on the offline "
            "model (no key needed); opens the merge picker",
}


def command_help(
    parser: argparse.ArgumentParser | None = None, names: Iterable[str] = HEADLESS_COMMANDS
) -> dict[str, str]:
    """``{name: one line}`` for every ``forkdeck`` subcommand, in the CLI parser's order,
    then any others alphabetically. ``parser``/``names`` default to the real ones."""
    if parser is None:
        from branching_core.cli import build_parser

        parser = build_parser()
    commands = frozenset(names)
    described: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                described[choice.dest] = choice.help or ""
    # A name in HEADLESS_COMMANDS that no parser handles is not a working command:
    # neither listed nor suggested.
    listed = [n for n in described if n in commands]
    listed += sorted(EXTRA_HELP.keys() - set(listed))  # the app's own (tui.main routes them)
    return {name: described.get(name) or EXTRA_HELP[name] for name in listed}


def listing(helps: dict[str, str] | None = None) -> str:
    """The ``commands:`` block of ``forkdeck --help``: one line per subcommand."""
    helps = command_help() if helps is None else helps
    width = max(map(len, helps), default=0) + 2
    lines = ["commands (forkdeck COMMAND --help for its options):"]
    lines += [f"  {name.ljust(width)}{text}" for name, text in helps.items()]
    return "\n".join(lines)


def suggest(word: str, helps: dict[str, str] | None = None) -> list[str]:
    """The subcommands ``word`` is a likely misspelling of, best first."""
    known = command_help() if helps is None else helps
    return difflib.get_close_matches(word, list(known), n=3, cutoff=0.6)
