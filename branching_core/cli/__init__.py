"""The headless ``forkdeck``/``branching`` commands.

``main(argv) -> int`` parses, runs one subcommand and returns the exit status:
0 only when something was committed (``status``: 0 when the workspace opened),
1 when nothing was committed or the command failed, 2 for bad usage (one line on
stderr; ``{"error": ...}`` with ``--json``), 130 after Ctrl-C (every branch aborted).
``CMD`` is everything after the first ``--``; words before it that look like a command
(``forkdeck run echo hi``) are refused with a hint to put them after ``--``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO

from branching_core.cli import agents, export, mcp, models, patterns, ports, run, status
from branching_core.cli._common import UsageError, add_common, error
from branching_core.cli.ports import open_in_browser  # the TUI's ctrl+b on a forwarded port
from branching_core.errors import BranchingError, error_name

CMD_TAIL = "-- CMD ..."


class _Parser(argparse.ArgumentParser):
    """Usage errors as ``UsageError`` (one line, exit 2). A subcommand whose defaults say
    ``takes_cmd=True`` (``set_defaults``) shows ``-- CMD ...`` at the end of its usage,
    since the command after ``--`` is cut off before argparse sees it."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")

    def format_usage(self) -> str:
        return self._with_cmd_tail(super().format_usage())

    def format_help(self) -> str:
        return self._with_cmd_tail(super().format_help())

    def _with_cmd_tail(self, text: str) -> str:
        if not self.get_default("takes_cmd"):
            return text
        usage, sep, rest = text.partition("\n\n")
        return f"{usage.rstrip()} {CMD_TAIL}{sep or chr(10)}{rest}"


class _Version(argparse.Action):
    """``-V``/``--version``: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        print(f"{parser.prog.split()[0]} {version()}")
        parser.exit()


def version() -> str:
    """forkdeck's installed version (``unknown`` when run from a bare source tree)."""
    from importlib import metadata

    try:
        return metadata.version("forkdeck")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser(prog: str = "forkdeck") -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    add_common(common)
    parser = _Parser(
        prog=prog,
        description="Run commands in copy-on-write branches of a directory; commit the winner. "
                    f"CMD is everything after --: {prog} run -- pytest -q",
        epilog="Exit status: 0 only if something was committed; 1 nothing committed or "
               "failed; 2 bad usage; 130 interrupted (every branch aborted).",
    )
    parser.add_argument("-V", "--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run.add_parser(sub, common)
    patterns.add_parsers(sub, common)
    status.add_parser(sub, common)
    models.add_parser(sub, common)
    mcp.add_parser(sub, common)
    agents.add_parser(sub, common)
    ports.add_parser(sub, common)
    export.add_parser(sub, common)  # issue 25: forkdeck export FORK LABEL
    return parser


def _prog_name() -> str:
    """``branching`` when installed under that name (``branching --help``), else forkdeck."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "branching" if name == "branching" else "forkdeck"


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    prog = prog or _prog_name()
    head = args_list[: args_list.index("--")] if "--" in args_list else args_list
    json_out = sys.stdout if "--json" in head else None  # (a --json after -- is the command's)
    # --json: stdout carries the one result object only. Libraries that print (Ray's
    # driver prints cluster errors such as "node marked dead" to sys.stdout from a thread)
    # are sent to stderr from the first instant, parsing and imports included: emit()
    # writes to the stdout saved here.
    quiet: contextlib.AbstractContextManager[object] = (
        contextlib.redirect_stdout(sys.stderr) if json_out is not None
        else contextlib.nullcontext()
    )
    with quiet:
        try:
            return _main(args_list, json_out, prog)
        finally:
            _leave_ray()


def _leave_ray() -> None:
    """A ``--ray`` run's driver connection ends while stdout still goes to stderr: left
    to interpreter exit, Ray's thread printed a late "node marked dead" after the JSON."""
    if "branching_core.cluster" in sys.modules:  # (never imported for a local run)
        from branching_core.cluster import disconnect_started_ray

        disconnect_started_ray()


def _main(args_list: list[str], json_out: TextIO | None, prog: str) -> int:
    json_mode = json_out is not None
    cmd: list[str] = []
    if "--" in args_list:
        cut = args_list.index("--")
        args_list, cmd = args_list[:cut], args_list[cut + 1:]
    parser = build_parser(prog)
    try:
        if not args_list:
            parser.print_help(sys.stderr)
            return 2
        args, extras = parser.parse_known_args(args_list)
        if args.command is None:
            raise UsageError("no command given")
        if extras:
            _refuse_extras(prog, args, extras)
        args.cmd = cmd
        if cmd and args.command in ("speculate", "status", "models", "agents", "ports", "export"):
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
        error(json_mode, f"{error_name(exc)}: {exc}")
        return 1


def _refuse_extras(prog: str, args: argparse.Namespace, extras: list[str]) -> NoReturn:
    """Words argparse did not take. For a command that runs CMD, a word that is not an
    option is the command typed without ``--``: say where it goes."""
    if getattr(args, "takes_cmd", False) and not extras[0].startswith("-"):
        raise UsageError(
            f"{prog} {args.command}: put the command after --, "
            f"e.g. {prog} {args.command} -- {' '.join(extras)}"
        )
    raise UsageError(f"{prog} {args.command}: unrecognized arguments: {' '.join(extras)}")


__all__ = ["build_parser", "main", "open_in_browser", "version"]
