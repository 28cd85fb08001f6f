"""``status``: the workspace, its backend, branches in its store and open forks."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from branching_core.cli._common import emit, open_workspace
from branching_core.review.judge_log import judge_agreement


def _forks(root: Path) -> list[dict[str, Any]]:
    forks = []
    for manifest in sorted((root / ".pydantic-deep" / "forks").glob("*/manifest.json")):
        entry: dict[str, Any] = {"id": manifest.parent.name, "manifest": str(manifest)}
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError) as exc:
            entry["error"] = f"unreadable manifest: {exc}"
        else:
            if isinstance(data, dict):
                for key in ("state", "status", "created", "created_at"):
                    if key in data:
                        entry[key] = data[key]
                branches = data.get("branches")
                if isinstance(branches, list | dict):
                    entry["branches"] = len(branches)
        forks.append(entry)
    return forks


def cmd_status(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    infos = ws.list_branches()
    details = [
        {"id": b.id, "name": b.name, "branch_path": b.branch_path, "parent": b.parent,
         "durable": b.durable, "owner_alive": b.owner_alive}
        for b in infos
    ]
    forks = _forks(ws.path)
    data = {
        "command": "status",
        "workspace": str(ws.path),
        "fstype": ws.fstype,
        "backend": ws.fstype,
        "passed_over": ws.passed_over,
        "branches": [b.name for b in infos],
        "branch_details": details,
        "forks": forks,
    }
    lines = [f"workspace: {ws.path}", f"backend: {ws.fstype}"]
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
        lines.append(f"forks ({len(forks)}):")
        lines.extend(f"  {f['id']}  {f.get('state', f.get('status', ''))}" for f in forks)
    agreement = judge_agreement(ws.path)
    data["judge_agreement"] = {"rate": agreement.rate, **asdict(agreement)}
    lines.append(agreement.line())
    emit(args, data, "\n".join(lines))
    return 0


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("status", parents=[common],
                       help="show the workspace, backend, branches and forks")
    p.set_defaults(handler=cmd_status)
