"""What every subcommand shares: workspace, limits, output and errors."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from branching_core.cli import _types
from branching_core.errors import BranchingError

if TYPE_CHECKING:  # imported where used: a command loads only the layers it needs
    from branching_core.sandbox import ResourceLimits
    from branching_core.workspace import Workspace


class UsageError(BranchingError):
    """Bad usage: reported on one line, exit status 2."""


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-w", "--workspace", default=".",
                        help="workspace directory (default: the current directory)")
    parser.add_argument("--backend", default="auto",
                        choices=["auto", "overlay", "reflink", "copy"],
                        help="copy-on-write backend (default: auto)")
    parser.add_argument("--memory-limit", metavar="SIZE", type=_types.memory,
                        help="per-branch memory cap (512M, 1G)")
    parser.add_argument("--cpu-limit", metavar="CPUS", type=_types.cpus,
                        help="per-branch CPU share (0.5 = half a core)")
    parser.add_argument("--pids-limit", metavar="N", type=_types.pids,
                        help="per-branch maximum number of processes")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object on stdout and nothing else")


def limits_from(args: argparse.Namespace) -> ResourceLimits | None:
    """``ResourceLimits`` from the flags, or None; bad values are usage errors."""
    if args.memory_limit is None and args.cpu_limit is None and args.pids_limit is None:
        return None
    from branching_core.sandbox import ResourceLimits

    try:
        return ResourceLimits(memory=args.memory_limit, cpu=args.cpu_limit, pids=args.pids_limit)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def open_workspace(args: argparse.Namespace) -> Workspace:
    from branching_core.workspace import Workspace

    try:
        return Workspace(args.workspace, backend=args.backend)
    except BranchingError as exc:
        raise UsageError(str(exc)) from None


def require_cmd(args: argparse.Namespace) -> list[str]:
    if not args.cmd:
        raise UsageError(f"{args.command}: no command given; use -- CMD ...")
    return list(args.cmd)


def emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    """The result: JSON on stdout with ``--json``, else human text."""
    if args.json:
        out = getattr(args, "json_out", sys.stdout)  # main() keeps stdout for this line only
        out.write(json.dumps(data) + "\n")
        out.flush()
    else:
        sys.stdout.write(text.rstrip("\n") + "\n")
        sys.stdout.flush()


def error(json_mode: bool, message: str) -> None:
    message = " ".join(str(message).split())
    if json_mode:
        print(json.dumps({"error": message}), file=sys.stderr, flush=True)
    else:
        print(f"error: {message}", file=sys.stderr, flush=True)


__all__ = ["UsageError", "add_common", "emit", "error", "limits_from", "open_workspace",
           "require_cmd"]
