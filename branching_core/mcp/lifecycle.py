"""Which branches this server opened, for whom, and what happens to them when that ends.

Every branch is owned by the client session that created it (the stdio connection, or
an HTTP session id). When the session ends (stdin closed, HTTP DELETE or idle timeout)
or the server exits (SIGTERM, SIGINT), its branches are aborted, unless created with
``keep=True``. A SIGKILLed server needs nothing from here: its branches are ordinary
engine branches of a dead owner (the mount helper dies with it, and the next open of the
workspace sweeps their directories), and kept ones are durable engine branches.

Kept branches are recorded under ``.pydantic-deep/mcp/<label>.json`` (label, branch id,
parent label) so a later server adopts them with ``Workspace.open_branch`` and a client
can still commit or abort them by label; ``forkdeck status`` lists them as durable
branches of the workspace.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from branching_core.atomicio import atomic_write
from branching_core.mcp.bounds import STATE_DIR, check_label

log = logging.getLogger(__name__)
RECORD_DIR = f"{STATE_DIR}/mcp"


@dataclass
class HeldBranch:
    """One branch this server holds open."""

    label: str
    branch: Any
    parent: str | None
    owner: str
    keep: bool
    created: str
    running: set[Any] = field(default_factory=set)
    """Sandboxed commands running in the branch (killed before it is aborted)."""


class BranchBook:
    """The label -> branch table of one server, with ownership and the keep records."""

    def __init__(self, workspace: Any, max_branches: int) -> None:
        self.ws = workspace
        self.max_branches = max_branches
        self.records = Path(workspace.path) / RECORD_DIR
        self._entries: dict[str, HeldBranch] = {}
        self._lock = threading.RLock()
        self._auto = itertools.count(1)
        self.closed = False

    # -- lookup ----------------------------------------------------------------------------
    def get(self, label: object) -> HeldBranch:
        name = check_label(label)
        with self._lock:
            self._prune()
            entry = self._entries.get(name)
        if entry is None:
            raise ToolError(f"unknown branch label {name!r}; branch_list shows the open ones")
        return entry

    def entries(self) -> list[HeldBranch]:
        with self._lock:
            self._prune()
            return sorted(self._entries.values(), key=lambda e: (e.created, e.label))

    def _prune(self) -> None:
        """Forget branches the engine closed behind our back (a stale sibling is aborted
        by its failed commit; a parent's abort takes its children)."""
        for label, entry in list(self._entries.items()):
            if not entry.branch.is_open:
                self._drop(label)

    def _drop(self, label: str) -> None:
        entry = self._entries.pop(label, None)
        if entry is not None and entry.keep:
            with contextlib.suppress(OSError):
                (self.records / f"{label}.json").unlink()

    # -- creation --------------------------------------------------------------------------
    def create(self, name: str | None, parent: str | None, keep: bool, owner: str) -> HeldBranch:
        with self._lock:
            if self.closed:
                raise ToolError("the server is shutting down")
            self._prune()
            if len(self._entries) >= self.max_branches:
                raise ToolError(
                    f"limit of {self.max_branches} open branches reached; commit or abort "
                    "some first (forkdeck mcp --max-branches raises it)"
                )
            label = check_label(name, "name") if name is not None else self._fresh_label()
            if label in self._entries:
                raise ToolError(f"a branch labelled {label!r} is already open")
            if keep and (self.records / f"{label}.json").exists():
                raise ToolError(f"a kept branch labelled {label!r} exists (another server "
                                "holds it); choose another name")
            parent_entry = self.get(parent) if parent is not None else None
            if keep and parent_entry is not None and not parent_entry.keep:
                raise ToolError(
                    f"keep=true needs a kept parent: {parent_entry.label!r} is aborted when "
                    "this session ends"
                )
            node = parent_entry.branch if parent_entry is not None else self.ws
            branch = node.branch(label, on_success=None, on_error=None, durable=keep)
            entry = HeldBranch(
                label=label,
                branch=branch,
                parent=parent_entry.label if parent_entry is not None else None,
                owner=owner,
                keep=keep,
                created=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            self._entries[label] = entry
            if keep:
                try:
                    self._write_record(entry)
                except OSError as exc:
                    self._entries.pop(label, None)
                    branch.abort()
                    raise ToolError(f"cannot record the kept branch ({exc.strerror})") from None
            return entry

    def _fresh_label(self) -> str:
        taken = {i.name for i in self.ws.list_branches()}
        while True:
            label = f"b{next(self._auto)}"
            if label not in self._entries and label not in taken:
                return label

    def _write_record(self, entry: HeldBranch) -> None:
        self.records.mkdir(parents=True, exist_ok=True)
        record = {
            "label": entry.label,
            "branch_id": entry.branch.id,
            "parent": entry.parent,
            "created": entry.created,
        }
        atomic_write(self.records / f"{entry.label}.json", json.dumps(record).encode())

    # -- ending ----------------------------------------------------------------------------
    def abort(self, label: str) -> list[str]:
        """Abort ``label`` and its children (commands in them killed first)."""
        with self._lock:
            entry = self.get(label)
            doomed = self._subtree(entry.label)
            for victim in reversed(doomed):
                for proc in list(self._entries[victim].running):
                    with contextlib.suppress(Exception):
                        proc.abort()
            entry.branch.abort()
            for victim in doomed:
                self._drop(victim)
            return doomed

    def _subtree(self, label: str) -> list[str]:
        out = [label]
        for current in out:  # grows while walking
            out.extend(e.label for e in self._entries.values() if e.parent == current)
        return out

    def forget(self, label: str) -> None:
        """After a commit: the branch is closed; drop it (and its record)."""
        with self._lock:
            self._drop(label)
            self._prune()

    def end_owner(self, owner: str) -> list[str]:
        """The session ``owner`` ended: abort its branches that are not kept."""
        with self._lock:
            roots = [
                e.label for e in self._entries.values()
                if e.owner == owner and not e.keep
                and (e.parent is None or self._entries[e.parent].owner != owner
                     or self._entries[e.parent].keep)
            ]
            aborted: list[str] = []
            for label in roots:
                if label in self._entries:
                    try:
                        aborted.extend(self.abort(label))
                    except Exception as exc:  # keep going: the others must still go
                        log.warning("aborting branch %s failed: %s", label, exc)
            return aborted

    def kill_running(self) -> int:
        """Kill every command running in a branch (its client is gone, or the server is
        stopping): the worker threads waiting for them return at once."""
        with self._lock:
            procs = [p for e in self._entries.values() for p in list(e.running)]
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.abort()
        return len(procs)

    def owners(self) -> set[str]:
        with self._lock:
            return {e.owner for e in self._entries.values()}

    def close(self) -> None:
        """Server exit: abort every branch not kept, unmount kept ones (they stay on
        disk for a later server)."""
        with self._lock:
            self.closed = True
            self.kill_running()
            for owner in {e.owner for e in self._entries.values()}:
                self.end_owner(owner)
            self._entries.clear()
        with contextlib.suppress(Exception):
            self.ws.close()

    # -- adoption of kept branches ---------------------------------------------------------
    def adopt_kept(self, owner: str) -> list[str]:
        """Reopen the branches earlier servers kept (parents first); records whose branch
        is gone are removed, ones whose owner still runs are left to it."""
        if not self.records.is_dir():
            return []
        infos = {i.id: i for i in self.ws.list_branches()}
        records: dict[str, dict[str, Any]] = {}
        for path in sorted(self.records.glob("*.json")):
            try:
                record = json.loads(path.read_text())
                label = check_label(record.get("label"))
            except (OSError, ValueError, ToolError):
                log.warning("ignoring unreadable kept-branch record %s", path)
                continue
            info = infos.get(str(record.get("branch_id")))
            if info is None or not info.durable:
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            if info.owner_alive and not info.open_here:
                continue  # another live server holds it
            records[label] = record
        adopted: list[str] = []
        pending = dict(records)
        while pending:
            progressed = False
            for label, record in list(pending.items()):
                parent = record.get("parent")
                if parent is not None and parent in pending:
                    continue
                pending.pop(label)
                progressed = True
                if parent is not None and parent not in self._entries:
                    continue
                try:
                    branch = self.ws.open_branch(str(record["branch_id"]))
                except Exception as exc:
                    log.warning("cannot reopen kept branch %s: %s", label, exc)
                    continue
                self._entries[label] = HeldBranch(
                    label=label, branch=branch, parent=parent, owner=owner, keep=True,
                    created=str(record.get("created") or ""),
                )
                adopted.append(label)
            if not progressed:
                break
        return adopted


__all__ = ["BranchBook", "HeldBranch"]
