"""The ``forkdeck`` command: headless subcommands go to the engine CLI, else the TUI."""

from __future__ import annotations

import importlib.util
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
    }
)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in HEADLESS_COMMANDS:
        if importlib.util.find_spec("branching_core.cli") is None:
            print(
                f"forkdeck: the headless command {args[0]!r} is not in this build yet",
                file=sys.stderr,
            )
            return 2
        from branching_core.cli import main as cli_main

        return cli_main(args)
    if importlib.util.find_spec("app.tui") is None:
        commands = ", ".join(sorted(HEADLESS_COMMANDS))
        print(
            f"forkdeck: the terminal UI is not in this build yet; headless commands: {commands}",
            file=sys.stderr,
        )
        return 2
    from app.tui import main as tui_main

    return tui_main(args)


if __name__ == "__main__":
    sys.exit(main())
