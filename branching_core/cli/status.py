"""``status``: the workspace, its backend, branches in its store and open forks."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from branching_core.cli._common import emit, open_workspace
from branching_core.cli.ports import forwards_status
from branching_core.review.judge_log import judge_agreement


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _forks(root: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What ``.pydantic-deep/forks`` holds (every fork, its state and size) and its totals."""
    from branching_core.fork.retention import REWIND_WINDOW, forks_usage, keep_resolved_setting
    from branching_core.fork.store import ForkStore

    store = ForkStore(root)
    forks = [
        {
            "id": u.fork_id,
            "manifest": str(store.manifest_path(u.fork_id)),
            "state": u.state,
            "created_at": u.created_at,
            "resolved_at": u.resolved_at,
            "branches": u.branches,
            "size_bytes": u.size_bytes,
            "rewindable": u.rewindable,
        }
        for u in forks_usage(store)
    ]
    try:
        keep: int | None = keep_resolved_setting(root)
    except Exception:  # a broken config.toml must not break status
        keep = None
    totals = {
        "path": str(store.forks_dir),
        "count": len(forks),
        "size_bytes": sum(f["size_bytes"] for f in forks),
        "keep_resolved": keep,
        "rewind_window": REWIND_WINDOW,
    }
    return forks, totals


def cmd_status(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    infos = ws.list_branches()
    details = [
        {"id": b.id, "name": b.name, "branch_path": b.branch_path, "parent": b.parent,
         "durable": b.durable, "owner_alive": b.owner_alive}
        for b in infos
    ]
    forks, fork_totals = _forks(ws.path)
    data = {
        "command": "status",
        "workspace": str(ws.path),
        "fstype": ws.fstype,
        "backend": ws.fstype,
        "passed_over": ws.passed_over,
        "branches": [b.name for b in infos],
        "branch_details": details,
        "forks": forks,
        "forks_store": fork_totals,
    }
    from branching_core.config import load_settings
    from branching_core.sandbox.privileges import unprivileged_limits

    problems = [p.message for p in load_settings(ws.path).problems]
    data["config_problems"] = problems
    lines = [f"CONFIG PROBLEM: {p} (its default is used)" for p in problems]
    lines += [f"workspace: {ws.path}", f"backend: {ws.fstype}"]
    gives_up = unprivileged_limits(ws.fstype)
    data["unprivileged"] = gives_up
    if gives_up:
        lines.append("unprivileged (not root): " + "; ".join(gives_up))
    for name, why in ws.passed_over.items():
        lines.append(f"  passed over {name}: {why}")
    if details:
        lines.append(f"branches ({len(details)}):")
        for d in details:
            flags = ", ".join(f for f, on in (("durable", d["durable"]),
                                               ("owner alive", d["owner_alive"])) if on)
            lines.append(f"  {d['branch_path']}  id {d['id']}" + (f"  ({flags})" if flags else ""))
    else:
        lines.append("branches: (none)")
    if forks:
        keep = fork_totals["keep_resolved"]
        lines.append(
            f"forks ({len(forks)}, {_human(fork_totals['size_bytes'])} in {fork_totals['path']}; "
            f"keeps the newest {keep if keep is not None else '?'} resolved, "
            f"file copies of the newest {fork_totals['rewind_window']}):"
        )
        lines.extend(
            f"  {f['id']}  {f['state']}  {f['branches']} branches  {_human(f['size_bytes'])}"
            + ("  rewindable" if f["rewindable"] else "")
            for f in forks
        )
    else:
        lines.append("forks: (none)")
    agreement = judge_agreement(ws.path)
    data["judge_agreement"] = {"rate": agreement.rate, **asdict(agreement)}
    lines.append(agreement.line())
    data["forwards"], forward_lines = forwards_status(ws.path)  # cli/ports.py
    lines.extend(forward_lines)
    emit(args, data, "\n".join(lines))
    return 0


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("status", parents=[common],
                       help="show the workspace, backend, branches and forks")
    p.set_defaults(handler=cmd_status)
