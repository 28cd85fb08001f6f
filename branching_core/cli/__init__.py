"""The headless ``forkdeck``/``branching`` commands.

``main(argv) -> int`` parses, runs one subcommand and returns the exit status:
0 only when something was committed (``status``: 0 when the workspace opened),
1 when nothing was committed or the command failed, 2 for bad usage (one line on
stderr; ``{"error": ...}`` with ``--json``), 130 after Ctrl-C (every branch aborted).
``CMD`` is everything after the first ``--``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO

from branching_core.cli import models, patterns, run, status
from branching_core.cli._common import UsageError, add_common, error
from branching_core.errors import BranchingError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    add_common(common)
    parser = _Parser(
        prog="forkdeck",
        description="Run commands in copy-on-write branches of a directory; commit the winner.",
        epilog="Exit status: 0 only if something was committed; 1 nothing committed or "
               "failed; 2 bad usage; 130 interrupted (every branch aborted).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run.add_parser(sub, common)
    patterns.add_parsers(sub, common)
    status.add_parser(sub, common)
    models.add_parser(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    json_mode = "--json" in args_list
    if not json_mode:
        return _main(args_list, None)
    # --json: stdout carries the one result object only. Libraries that print (Ray's
    # driver prints cluster errors such as "node marked dead" to sys.stdout from a thread)
    # are sent to stderr from the first instant, parsing and imports included: emit()
    # writes to the stdout saved here.
    json_out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        return _main(args_list, json_out)


def _main(args_list: list[str], json_out: TextIO | None) -> int:
    json_mode = json_out is not None
    cmd: list[str] = []
    if "--" in args_list:
        cut = args_list.index("--")
        args_list, cmd = args_list[:cut], args_list[cut + 1:]
    parser = build_parser()
    try:
        if not args_list:
            parser.print_help(sys.stderr)
            return 2
        args = parser.parse_args(args_list)
        if args.command is None:
            raise UsageError("no command given")
        args.cmd = cmd
        if cmd and args.command in ("speculate", "status", "models"):
            raise UsageError(f"{args.command} takes no -- CMD")
        if json_out is not None:
            args.json_out = json_out
        return int(args.handler(args))
    except UsageError as exc:
        error(json_mode, str(exc))
        return 2
    except KeyboardInterrupt:
        error(json_mode, "interrupted: every branch was aborted, nothing committed")
        return 130
    except (BranchingError, OSError, ValueError, RuntimeError) as exc:
        error(json_mode, f"{type(exc).__name__}: {exc}")
        return 1


__all__ = ["build_parser", "main"]
