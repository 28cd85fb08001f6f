"""``run [--on-error none] [--ask] -- CMD``: one command in one branch.

Commits on exit 0 (or on "y" with ``--ask``); otherwise aborts, or with
``--on-error none`` keeps the branch as a durable branch (see ``status``).
"""

from __future__ import annotations

import argparse
import sys
import uuid

from branching_core.cli._common import UsageError, emit, limits_from, open_workspace, require_cmd
from branching_core.cli.network_opts import add_network_option, setup_from_args


def _ask(question: str) -> bool:
    while True:
        print(question, end="", file=sys.stderr, flush=True)
        try:
            answer = input().strip().lower()
        except EOFError:
            return False
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no", ""):
            return False


def cmd_run(args: argparse.Namespace) -> int:
    from branching_core.sandbox import SandboxedCommand

    cmd = require_cmd(args)
    limits = limits_from(args)
    ws = open_workspace(args)
    name = args.branch or f"run-{uuid.uuid4().hex[:8]}"
    keep = args.on_error == "none"

    def forward(stream: str, line: str) -> None:
        out = sys.stderr if (args.json or stream == "stderr") else sys.stdout
        out.write(line + "\n")
        out.flush()

    setup = setup_from_args(args, ws)
    known = {s.name for s in setup.services}
    for wanted in args.services:
        if wanted not in known:
            raise UsageError(f"run: unknown service {wanted!r} (declared: "
                             f"{', '.join(sorted(known)) or 'none'})")
    branch = ws.branch(name, on_success=None, on_error=None, durable=keep)
    action = "aborted"
    exit_code = -1
    try:
        network = setup.sandbox_network()
        if args.services or any(s.autostart for s in setup.services):
            net = setup.for_branch(branch, limits=limits)  # closes with the branch
            for wanted in args.services:
                net.start_service(wanted)
                for fwd in net.forwards.values():
                    if fwd.service == wanted:
                        print(f"{fwd.label()}", file=sys.stderr, flush=True)
            network = net.network
        proc = SandboxedCommand(cmd, branch.path, limits=limits, mount_at=str(ws.path),
                             on_output=forward, network=network)
        try:
            exit_code = proc.wait()
        finally:
            proc.abort()
        commit = _ask("commit changes? [y/N] ") if args.ask else exit_code == 0
        if commit:
            branch.commit()
            action = "committed"
        elif keep and not args.ask:
            action = "kept"
        else:
            branch.abort()
    finally:
        if branch.is_open and action != "kept":
            branch.abort()
    data = {"command": "run", "branch": name, "exit_code": exit_code, "action": action}
    if action == "kept":
        data["branch_id"] = branch.id
    emit(args, data, f"{action}: branch {name} (exit code {exit_code})")
    if action == "committed":
        return 0
    return exit_code if exit_code > 0 else 1


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("run", parents=[common], help="run CMD in a new branch",
                       description="Run CMD in a new branch; commit on exit 0, else abort.")
    p.add_argument("-b", "--branch", help="branch name (default: run-<random>)")
    p.add_argument("--on-error", choices=["abort", "none"], default="abort",
                   help="on failure: abort (default) or keep the branch (durable)")
    p.add_argument("--ask", action="store_true", help="ask before committing")
    add_network_option(p)
    p.set_defaults(handler=cmd_run, takes_cmd=True)
