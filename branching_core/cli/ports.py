"""``ports``: the host forwards to branches' ports that live forkdeck processes hold.

``forkdeck ports`` lists them for this workspace (``--all``: every workspace), one per
line as ``b · web → http://127.0.0.1:41234``; ``--open BRANCH[:SERVICE]`` opens one in
``$BROWSER``. The forwards themselves belong to the process that runs the branch (the
TUI, ``forkdeck run --service``, an agent run): they close with their branch.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
from dataclasses import asdict

from branching_core.cli._common import UsageError, emit
from branching_core.sandbox.branch_net import PortRecord, ports_records


def open_in_browser(url: str) -> str:
    """Open ``url`` with ``$BROWSER`` (its ``%s`` replaced, else the URL appended), else
    ``xdg-open``; returns the command line used. Raises ``OSError`` if none can start."""
    browser = os.environ.get("BROWSER", "").split(":")[0].strip()
    if browser:
        argv = shlex.split(browser.replace("%s", url)) if "%s" in browser else \
            [*shlex.split(browser), url]
    else:
        argv = ["xdg-open", url]
    subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    return shlex.join(argv)


def _label(rec: PortRecord) -> str:
    what = rec.service or str(rec.port)
    return f"{rec.branch} · {what} → {rec.url}"


def _pick(records: list[PortRecord], wanted: str) -> PortRecord:
    branch, _, service = wanted.partition(":")
    for rec in records:
        if rec.branch == branch and (not service or service in (rec.service, str(rec.port))):
            return rec
    raise UsageError(f"ports: no forward for {wanted!r} (see forkdeck ports)")


def forwards_status(workspace: str | os.PathLike[str]) -> tuple[list[dict[str, object]],
                                                                list[str]]:
    """For ``forkdeck status``: the forwards of ``workspace`` and their lines."""
    records = ports_records(os.path.realpath(workspace))
    lines = [f"forwards ({len(records)}):", *(f"  {_label(r)}  ({r.status})" for r in records)]
    return [asdict(r) for r in records], lines if records else ["forwards: (none)"]


def cmd_ports(args: argparse.Namespace) -> int:
    where = None if args.all else os.path.realpath(args.workspace)
    records = ports_records(where)
    if args.open:
        rec = _pick(records, args.open)
        used = open_in_browser(rec.url)
        emit(args, {"command": "ports", "opened": asdict(rec), "browser": used},
             f"opened {_label(rec)}")
        return 0
    lines = [f"{_label(r)}  ({r.status}, pid {r.pid})" for r in records] or \
        ["no forwards (start a service: forkdeck run --service NAME, or /services in the TUI)"]
    emit(args, {"command": "ports", "forwards": [asdict(r) for r in records]}, "\n".join(lines))
    return 0


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("ports", parents=[common], help="list host forwards to branch ports",
                       description="List the host forwards (127.0.0.1:PORT -> a branch's "
                                   "port) held by running forkdeck processes.")
    p.add_argument("--all", action="store_true", help="every workspace, not only this one")
    p.add_argument("--open", metavar="BRANCH[:SERVICE]", help="open that forward in $BROWSER")
    p.set_defaults(handler=cmd_ports)
