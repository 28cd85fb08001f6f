"""The pattern subcommands: speculate, best-of-n, reflexion, tournament, cascade.

Each builds command candidates (``_command``), runs the library pattern with a live
view on a terminal, and prints seed 000's summary (``--json``: one object).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core.cli import _git, _types
from branching_core.cli._command import CommandCandidate, CommandTask, warn_stderr
from branching_core.cli._common import (
    UsageError,
    emit,
    limits_from,
    open_workspace,
    require_cmd,
)
from branching_core.cli._live import LiveView
from branching_core.cli.network_opts import add_network_option, setup_from_args
from branching_core.errors import OperationError, error_name
from branching_core.patterns import (
    BestOfN,
    Cascaded,
    Reflexion,
    Speculate,
    SpeculationOutcome,
    Tournament,
)

if TYPE_CHECKING:
    from branching_core.sandbox import ResourceLimits
    from branching_core.workspace import Workspace


def _summary(outcome: SpeculationOutcome) -> list[dict[str, Any]]:
    out = []
    for r in outcome.all_results:
        entry = r.to_dict()
        rv = r.return_value
        if rv is not None and hasattr(rv, "exit_code"):
            entry["exit_code"] = rv.exit_code
        out.append(entry)
    return out


def _text(outcome: SpeculationOutcome, what: str, labels: dict[int, str]) -> str:
    lines = []
    if outcome.winner is not None:
        w = outcome.winner
        lines.append(f"winner: {what} {w.branch_index} (score {w.score:.2f}), committed")
    else:
        lines.append(f"no {what} succeeded; nothing committed")
    for r in outcome.all_results:
        err = f"  ({error_name(r.exception)}: {r.exception})" if r.exception else ""
        label = f"  {labels[r.branch_index]}" if r.branch_index in labels else ""
        lines.append(f"  [{r.branch_index}] {r.status:<10} score {r.score:.2f} "
                     f"{r.duration:6.2f}s{label}{err}")
    return "\n".join(lines)


def _execute(args: argparse.Namespace, pattern: Any, ws: Workspace,
             labels: dict[int, str]) -> SpeculationOutcome:
    live = sys.stderr.isatty() and not args.json
    if not live:
        return pattern(ws)
    with LiveView(labels) as view:
        pattern.progress = view.update
        return pattern(ws)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    # Both were checked by argparse (``_types.seconds``).
    opts = {"timeout": getattr(args, "timeout", None),
            "overall_timeout": getattr(args, "overall_timeout", None)}
    address = getattr(args, "ray", None)
    if address is not None:
        opts["runner"] = _ray_runner(address)
    return opts


def _ray_runner(address: str) -> Any:
    """``--ray ADDRESS``: candidates run as Ray tasks (``auto`` honours RAY_ADDRESS)."""
    from branching_core.cluster import RayRunner, RayUnavailableError

    try:
        return RayRunner(None if address == "env" else address)
    except RayUnavailableError as exc:
        raise UsageError(str(exc)) from None


def _candidate_options(
    args: argparse.Namespace, ws: Workspace, limits: ResourceLimits | None
) -> dict[str, Any]:
    return {"workspace_path": str(ws.path), "limits": limits, "warn": warn_stderr,
            "network": setup_from_args(args, ws)}


def cmd_speculate(args: argparse.Namespace) -> int:
    if not args.candidates:
        raise UsageError("speculate: give at least one -c CMD")
    opts, limits = _options(args), limits_from(args)
    ws = open_workspace(args)
    args.git_watch = _git.prepare(args, ws, args.command)
    cands = [
        CommandCandidate(c, label=f"candidate {i}", **_candidate_options(args, ws, limits))
        for i, c in enumerate(args.candidates)
    ]
    labels = dict(enumerate(args.candidates))
    outcome = _execute(args, Speculate(cands, **opts), ws, labels)
    return _report(args, "speculate", outcome, "candidate", labels,
                   candidates=len(args.candidates))


def cmd_best_of_n(args: argparse.Namespace) -> int:
    cmd = require_cmd(args)
    opts, limits = _options(args), limits_from(args)
    ws = open_workspace(args)
    args.git_watch = _git.prepare(args, ws, args.command)
    task = CommandTask(cmd, score_fd=True, **_candidate_options(args, ws, limits))
    outcome = _execute(args, BestOfN(task, n=args.n, **opts), ws, {})
    winner = outcome.winner
    return _report(args, "best-of-n", outcome, "attempt", n=args.n,
                   winner={"index": winner.branch_index, "score": winner.score} if winner else None)


_INDEX = object()  # "winner": the committed branch's index (the seed-000 shape)


def _report(
    args: argparse.Namespace,
    command: str,
    outcome: SpeculationOutcome,
    noun: str,
    labels: dict[int, str] | None = None,
    *,
    winner: Any = _INDEX,
    **extra: Any,
) -> int:
    """Print the outcome (``--json``: one object) and return the exit status: 0 only if
    something was committed."""
    if winner is _INDEX:
        winner = outcome.winner.branch_index if outcome.winner else None
    data = {
        "command": command,
        **extra,
        "committed": outcome.committed,
        "winner": winner,
        "results": _summary(outcome),
    }
    text = _text(outcome, noun, labels or {})
    git = _git.finish(getattr(args, "git_watch", None), outcome, labels or {}, command=command)
    if git is not None:
        data["git"] = git
        text += "\n" + "\n".join(git["notes"])
    emit(args, data, text)
    return 0 if outcome.committed else 1


def _critique(command: str, ws: Workspace, limits: ResourceLimits | None) -> Callable[[Path], str]:
    def critique(path: Path) -> str:
        from branching_core.sandbox import run_command

        result = run_command(command, path, limits=limits, mount_at=str(ws.path))
        return result.stdout.strip()

    return critique


def cmd_reflexion(args: argparse.Namespace) -> int:
    cmd = require_cmd(args)
    if args.critique and args.ray is not None:
        raise UsageError("reflexion: --critique reads the failed branch here; it cannot "
                         "be combined with --ray")
    opts, limits = _options(args), limits_from(args)
    ws = open_workspace(args)
    args.git_watch = _git.prepare(args, ws, args.command)
    task = CommandTask(cmd, **_candidate_options(args, ws, limits))
    critique = _critique(args.critique, ws, limits) if args.critique else None
    outcome = _execute(args, Reflexion(task, max_retries=args.retries, critique=critique,
                                       **opts), ws, {})
    return _report(args, "reflexion", outcome, "attempt", attempts=len(outcome.all_results))


def _judge(command: str, ws: Workspace) -> Callable[[Path, Path], int]:
    """The judge runs as a plain subprocess in the workspace: it must see both views."""

    def judge(a: Path, b: Path) -> int:
        env = {**os.environ, "BRANCHING_A": str(a), "BRANCHING_B": str(b)}
        proc = subprocess.run(command, shell=True, cwd=ws.path, env=env,
                              capture_output=True, text=True, check=False)
        words = proc.stdout.split()
        answer = words[0].lower() if words else ""
        if answer in ("0", "a"):
            return 0
        if answer in ("1", "b"):
            return 1
        raise OperationError(f"judge {command!r} printed {proc.stdout.strip()[:40]!r} "
                             f"(exit {proc.returncode}); expected 0/a or 1/b")

    return judge


def cmd_tournament(args: argparse.Namespace) -> int:
    cmd = require_cmd(args)
    opts, limits = _options(args), limits_from(args)
    ws = open_workspace(args)
    args.git_watch = _git.prepare(args, ws, args.command)
    task = CommandTask(cmd, **_candidate_options(args, ws, limits))
    pattern = Tournament(task, n=args.n, judge=_judge(args.judge, ws), **opts)
    outcome = _execute(args, pattern, ws, {})
    rounds = [[{"a": a, "b": b, "winner": w} for a, b, w in rnd] for rnd in pattern.rounds]
    return _report(args, "tournament", outcome, "candidate", n=args.n, rounds=rounds)


def _fan_out(text: str) -> list[int]:
    try:
        widths = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"cascade: --fan-out must look like 1,2,4, got {text!r}") from None
    if not widths or any(w < 1 for w in widths):
        raise UsageError(f"cascade: --fan-out must be positive integers, got {text!r}")
    return widths


def cmd_cascade(args: argparse.Namespace) -> int:
    cmd = require_cmd(args)
    widths = _fan_out(args.fan_out)
    opts, limits = _options(args), limits_from(args)
    ws = open_workspace(args)
    args.git_watch = _git.prepare(args, ws, args.command)
    task = CommandTask(cmd, **_candidate_options(args, ws, limits))
    pattern = Cascaded(task, fan_out=widths, **opts)
    outcome = _execute(args, pattern, ws, {})
    return _report(args, "cascade", outcome, "attempt", fan_out=widths, waves=pattern.waves)


def _ray_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run candidates on a Ray cluster: auto (RAY_ADDRESS or this "
                        "machine's cluster), ray://HOST:PORT, or env; needs forkdeck[ray]")


def _timeouts(p: argparse.ArgumentParser) -> None:
    add_network_option(p, services=False)  # every pattern command has timeouts
    p.add_argument("--timeout", type=_types.seconds, metavar="S",
                   help="each candidate's wall clock in seconds (killed when it passes)")
    p.add_argument("--overall-timeout", type=_types.seconds, metavar="S",
                   help="bound on the whole command in seconds")


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("speculate", parents=[common], help="race commands; first success wins")
    p.add_argument("-c", "--candidate", action="append", dest="candidates", metavar="CMD",
                   default=[], help="a shell command (repeat for each candidate)")
    _timeouts(p)
    _git.add_git_options(p)
    _ray_option(p)
    p.set_defaults(handler=cmd_speculate)

    p = sub.add_parser("best-of-n", parents=[common],
                       help="run CMD N times, commit the best score (written to fd 3)")
    p.add_argument("-n", type=_types.count, default=3, help="number of attempts (default 3)")
    _timeouts(p)
    _git.add_git_options(p)
    _ray_option(p)
    p.set_defaults(handler=cmd_best_of_n, takes_cmd=True)

    p = sub.add_parser("reflexion", parents=[common],
                       help="retry CMD with critique feedback in BRANCHING_FEEDBACK")
    p.add_argument("--retries", type=_types.count, default=3, help="total attempts (default 3)")
    p.add_argument("--critique", metavar="CMD",
                   help="shell command run in a failed attempt's branch; its stdout is feedback")
    _timeouts(p)
    _git.add_git_options(p)
    _ray_option(p)
    p.set_defaults(handler=cmd_reflexion, takes_cmd=True)

    p = sub.add_parser("tournament", parents=[common],
                       help="run CMD N times, pick a winner by pairwise --judge")
    p.add_argument("-n", type=_types.count, default=4, help="number of candidates (default 4)")
    p.add_argument("--judge", required=True, metavar="CMD",
                   help="prints 0/a or 1/b; gets BRANCHING_A and BRANCHING_B (branch paths)")
    _timeouts(p)
    _git.add_git_options(p)
    p.set_defaults(handler=cmd_tournament, takes_cmd=True)

    p = sub.add_parser("cascade", parents=[common],
                       help="waves of CMD with widening fan-out and error feedback")
    p.add_argument("--fan-out", default="1,2,4", metavar="K,K,...",
                   help="candidates per wave (default 1,2,4)")
    _timeouts(p)
    _git.add_git_options(p)
    _ray_option(p)
    p.set_defaults(handler=cmd_cascade, takes_cmd=True)
