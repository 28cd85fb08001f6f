"""The ``forkdeck`` command: headless subcommands go to the engine CLI, else the TUI."""

from __future__ import annotations

import sys

HEADLESS_COMMANDS = frozenset(
    {
        "run",
        "speculate",
        "best-of-n",
        "reflexion",
        "tournament",
        "cascade",
        "tree",
        "beam",
        "status",
        "models",
        "export",  # issue 25: a fork branch as a git patch or branch
    }
)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in HEADLESS_COMMANDS:
        from branching_core.cli import main as cli_main

        return cli_main(args)
    from .tui import main as tui_main

    return tui_main(args)


if __name__ == "__main__":
    sys.exit(main())
