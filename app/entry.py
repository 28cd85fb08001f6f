"""The ``forkdeck`` command: headless subcommands go to the engine CLI, else the TUI.

A new subcommand: its name in ``HEADLESS_COMMANDS`` (``command_names.py``) and its parser in
``branching_core.cli.build_parser`` (with a one-line ``help=``); ``forkdeck --help`` and
the "did you mean" for a mistyped command pick it up from there (``subcommands.py``).
"""

from __future__ import annotations

import os
import sys

from .command_names import APP_COMMANDS, HEADLESS_COMMANDS


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in HEADLESS_COMMANDS:
        from branching_core.cli import main as cli_main

        return cli_main(args, prog="forkdeck")
    if args and args[0] not in APP_COMMANDS and _looks_like_a_command(args[0]):
        from .subcommands import suggest

        if close := suggest(args[0]):
            also = "".join(f" or 'forkdeck {name}'" for name in close[1:])
            print(f"forkdeck: {args[0]!r} is not a command or a directory; did you mean "
                  f"'forkdeck {close[0]}'{also}? (forkdeck --help lists the commands)",
                  file=sys.stderr)
            return 2
    from .tui import main as tui_main

    return tui_main(args)


def _looks_like_a_command(word: str) -> bool:
    """A bare word that names no existing path: a subcommand, perhaps mistyped."""
    return (
        bool(word) and not word.startswith(("-", ".", "~"))
        and os.sep not in word and not os.path.exists(word)
    )


if __name__ == "__main__":
    sys.exit(main())
