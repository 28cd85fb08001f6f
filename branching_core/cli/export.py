"""``forkdeck export FORK LABEL [--patch FILE | --branch NAME]``: a fork branch's change
for a pull request, without landing anything in the working tree.

The fork's branch is reopened from the store (its fork must still be open: left open by
a session that ended, or recovered), and its change, relative to the workspace, becomes
a patch that ``git apply`` takes on a clean clone (binary-safe: ``--binary``), written
to FILE or stdout, or a new git branch NAME (one commit on top of HEAD, with the same
``Forkdeck-*`` trailers a landing commit has). The working tree, the index and HEAD are
never touched; the branch stays open for a later merge.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core.cli._common import UsageError, emit, open_workspace

if TYPE_CHECKING:
    from branching_core.workspace import Workspace


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("export", parents=[common],
                       help="a fork branch's change as a git patch or a git branch")
    p.add_argument("fork", metavar="FORK", help="the fork id (see `forkdeck status`)")
    p.add_argument("label", metavar="LABEL", help="the branch's label")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--patch", metavar="FILE",
                       help="write the patch to FILE (default: stdout)")
    where.add_argument("--branch", metavar="NAME",
                       help="make a git branch NAME holding exactly the change")
    p.add_argument("-m", "--message", help="the exported branch's commit message")
    p.set_defaults(handler=cmd_export)


def _branch_entry(ws: Workspace, fork_id: str, label: str) -> dict[str, Any]:
    from branching_core.fork.store import ForkStore

    manifest = ForkStore(ws.path).read_manifest(fork_id)
    if manifest is None:
        raise UsageError(f"export: no fork {fork_id!r} in {ws.path}")
    entries = manifest.get("branches") or []
    entry = next((b for b in entries if b.get("label") == label), None)
    if entry is None:
        labels = ", ".join(str(b.get("label")) for b in entries) or "none"
        raise UsageError(f"export: fork {fork_id} has no branch {label!r} (branches: {labels})")
    if entry.get("resolution") is not None or not entry.get("workspace_branch_id"):
        raise UsageError(
            f"export: branch {label} of fork {fork_id} is {entry.get('resolution') or 'gone'}: "
            "nothing left to export"
        )
    return entry


def cmd_export(args: argparse.Namespace) -> int:
    from branching_core.errors import BranchingError
    from branching_core.gitops import (
        GitError,
        check_branch_name,
        export_branch,
        export_patch,
        landing_message,
        repo_state,
    )

    ws = open_workspace(args)
    if repo_state(ws.path, with_dirty=False) is None:
        raise UsageError(f"export: {ws.path} is not in a git repository")
    if args.branch is not None:
        why = check_branch_name(ws.path, args.branch)
        if why is not None:
            raise UsageError(f"export: {why}")
    entry = _branch_entry(ws, args.fork, args.label)
    try:
        branch = ws.open_branch(str(entry["workspace_branch_id"]))
    except BranchingError as exc:
        raise UsageError(f"export: cannot reopen branch {args.label}: {exc}") from None
    try:
        paths = branch.changes().all_paths
        spec = entry.get("spec") or {}
        if args.branch is not None:
            message = landing_message(
                args.message,
                steer=str(spec.get("steer") or ""),
                trailers={"Fork": args.fork, "Branch": args.label,
                          "Model": spec.get("model") or "default", "Tests": "not run"},
            )
            commit = export_branch(branch.path, ws.path, paths, args.branch, message)
            emit(args, {"command": "export", "fork": args.fork, "label": args.label,
                        "branch": args.branch, "commit": commit, "paths": len(paths)},
                 f"exported {len(paths)} path(s) of {args.label} as branch {args.branch} "
                 f"({commit[:10]})")
            return 0
        patch = export_patch(branch.path, ws.path, paths)
    except GitError as exc:
        raise UsageError(f"export: {exc}") from None
    finally:
        branch.close_for_exit()  # durable: unmounted, kept for a later merge
    if args.patch is None:
        sys.stdout.buffer.write(patch)
        sys.stdout.flush()
        return 0
    Path(args.patch).write_bytes(patch)
    emit(args, {"command": "export", "fork": args.fork, "label": args.label,
                "patch": args.patch, "bytes": len(patch), "paths": len(paths)},
         f"wrote {args.patch}: {len(paths)} path(s) of {args.label}")
    return 0


__all__ = ["cmd_export"]
