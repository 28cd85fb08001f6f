"""The ``forkdeck`` subcommands by who runs them: the engine CLI (``HEADLESS_COMMANDS``,
the dispatch table of ``entry.main``) or the TUI itself (``APP_COMMANDS``).

Why a module of its own: ``entry`` dispatches on these names and ``subcommands`` lists and
suggests them, while ``entry`` also calls ``subcommands`` (and ``tui``, which calls it for
``--help``); the names sit below all three so none imports another in a circle. A new
subcommand: one line here, its parser in ``branching_core.cli.build_parser``.
"""

from __future__ import annotations

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
        "mcp",
        "agents",
        "ports",
        "export",  # issue 25: a fork branch as a git patch or branch
    }
)

APP_COMMANDS = frozenset({"demo"})
"""Subcommands the TUI itself handles (``tui.main``; described in ``subcommands.EXTRA_HELP``)."""
