"""What each MCP tool does, over the engine's public API (transport-free, synchronous).

``ForkdeckTools`` holds one workspace and its ``BranchBook``; the server module only
adapts these methods to MCP (argument schemas, the owning session, errors). Every
method either returns a typed result or raises ``ToolError`` with one line: engine
errors (conflicts, stale branches, limits that cannot be enforced) are translated here.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcp.server.mcpserver.exceptions import ToolError

from branching_core import (
    BestOfN,
    BranchingError,
    CommandCandidate,
    ConflictError,
    ResourceLimitError,
    ResourceLimits,
    SandboxedCommand,
    Speculate,
)
from branching_core.errors import error_name
from branching_core.mcp.bounds import (
    MAX_CANDIDATES,
    MAX_OUTPUT_CHARS,
    check_command,
    check_timeout,
    cut,
    one_line,
    relative_path,
)
from branching_core.mcp.diff import diff_branch
from branching_core.mcp.lifecycle import BranchBook, HeldBranch
from branching_core.mcp.results import (
    AbortResult,
    BranchCreated,
    BranchEntry,
    BranchListing,
    CandidateReport,
    CommitResult,
    DiffResult,
    ExploreResult,
    RunLimits,
    RunResult,
)

PRIVATE_NOTE = (
    "Edit files at `path` with your own file tools; the changes are private to this branch "
    "(the workspace and other branches do not see them) until branch_commit. Commands run "
    "with branch_run see the branch at the workspace's own path."
)


@dataclass(frozen=True)
class ServerOptions:
    """What ``forkdeck mcp`` was started with: the settings every tool call obeys."""

    limits: Any = None
    """``ResourceLimits`` applied to every sandboxed command (None: no caps)."""
    network: bool | str = False
    """The sandboxed commands' network: ``none`` (default), ``private`` or ``host``
    (``False``/``True`` mean none/host)."""
    run_timeout_s: float = 600.0
    max_branches: int = 64


class ForkdeckTools:
    """The tools' behaviour for one workspace."""

    def __init__(self, workspace: Any, options: ServerOptions) -> None:
        self.ws = workspace
        self.options = options
        self.book = BranchBook(workspace, options.max_branches)

    # -- helpers ---------------------------------------------------------------------------
    def _parent_root(self, entry: HeldBranch) -> Path:
        return Path(entry.branch.parent.path)

    def _limits(self, limits: RunLimits | dict[str, Any] | None) -> Any:
        base = self.options.limits
        if isinstance(limits, RunLimits):
            limits = limits.model_dump(exclude_none=True)
        if not limits:
            return base
        unknown = set(limits) - {"memory", "cpu", "pids"}
        if unknown:
            raise ToolError(f"unknown limits {sorted(unknown)}; use memory, cpu, pids")
        merged = {
            "memory": getattr(base, "memory", None),
            "cpu": getattr(base, "cpu", None),
            "pids": getattr(base, "pids", None),
        }
        merged.update({k: v for k, v in limits.items() if v is not None})
        try:
            return ResourceLimits(**merged)
        except (ValueError, TypeError) as exc:
            raise ToolError(f"bad limits: {one_line(exc)}") from None

    # -- branch_create / branch_list -------------------------------------------------------
    def create(self, name: str | None, parent: str | None, keep: bool, owner: str) -> BranchCreated:
        entry = self.book.create(name, parent, keep, owner)
        note = PRIVATE_NOTE
        if keep:
            note += " keep=true: it outlives this session; a later server can commit or abort it."
        return BranchCreated(
            label=entry.label, path=str(entry.branch.path), parent=entry.parent, keep=keep,
            note=note,
        )

    def list(self) -> BranchListing:
        rows = []
        for entry in self.book.entries():
            try:
                changed = len(entry.branch.changes().all_paths)
            except BranchingError:
                continue  # closed meanwhile
            rows.append(BranchEntry(
                label=entry.label, parent=entry.parent, path=str(entry.branch.path),
                changed=changed, created=entry.created, keep=entry.keep,
            ))
        return BranchListing(workspace=str(self.ws.path), branches=rows,
                             note="" if rows else "no open branches; branch_create makes one")

    # -- branch_run ------------------------------------------------------------------------
    def run(self, label: str, command: str, timeout_s: float | None,
            limits: RunLimits | dict[str, Any] | None) -> RunResult:
        entry = self.book.get(label)
        command = check_command(command)
        timeout = check_timeout(timeout_s, self.options.run_timeout_s)
        caps = self._limits(limits)
        started = time.monotonic()
        try:
            proc = SandboxedCommand(
                ["/bin/sh", "-c", command], entry.branch.path, limits=caps,
                network=self.options.network, mount_at=str(self.ws.path),
                max_output=4 * MAX_OUTPUT_CHARS,
            )
        except ResourceLimitError as exc:
            raise ToolError(f"limits cannot be enforced here: {one_line(exc)}") from None
        entry.running.add(proc)
        timed_out = False
        try:
            try:
                code = proc.wait(timeout)
            except TimeoutError:
                timed_out = True
                code = proc.exit_code if proc.exit_code is not None else -9
            except ResourceLimitError as exc:
                raise ToolError(f"limits cannot be enforced here: {one_line(exc)}") from None
        finally:
            proc.abort()
            entry.running.discard(proc)
        stdout, cut_out = cut(proc.stdout, MAX_OUTPUT_CHARS)
        stderr, cut_err = cut(proc.stderr, MAX_OUTPUT_CHARS)
        notes = []
        if cut_out or cut_err or proc.stdout_dropped or proc.stderr_dropped:
            notes.append("output was cut (head and tail kept); redirect to a file in the "
                         "branch and read it there for all of it")
        if timed_out:
            notes.append(f"killed after {timeout:g} s (timeout_s)")
        return RunResult(
            label=entry.label, command=cut(command, 500)[0], exit_code=code,
            timed_out=timed_out, duration_s=round(time.monotonic() - started, 3),
            stdout=stdout, stderr=stderr, note="; ".join(notes),
        )

    # -- branch_diff -----------------------------------------------------------------------
    def diff(self, label: str, paths: list[str] | None) -> DiffResult:
        entry = self.book.get(label)
        wanted = None
        if paths is not None:
            roots = [Path(entry.branch.path), Path(self.ws.path)]
            wanted = [relative_path(p, roots) for p in paths]
        return diff_branch(entry.label, entry.branch, self._parent_root(entry), wanted)

    # -- branch_commit / branch_abort ------------------------------------------------------
    def commit(self, label: str) -> CommitResult:
        entry = self.book.get(label)
        if entry.running:
            raise ToolError(f"branch {entry.label!r} has a command running; wait for it first")
        children = [e.label for e in self.book.entries() if e.parent == entry.label]
        if children:
            raise ToolError(
                f"branch {entry.label!r} has open child branches {children}; commit or "
                "abort them first"
            )
        into = entry.parent if entry.parent is not None else str(self.ws.path)
        try:
            changes = entry.branch.changes()
            entry.branch.commit()
        except ConflictError as exc:
            paths = list(getattr(exc, "paths", []) or [])
            what = (f"a sibling committed first ({one_line(exc)})" if getattr(exc, "stale", False)
                    else f"the parent changed {', '.join(paths[:5]) or 'paths'} since the "
                         "branch was made")
            if entry.branch.is_open:
                raise ToolError(
                    f"conflict: branch {entry.label!r} was not committed: {what}; nothing "
                    "landed. The branch is still open: inspect it, then abort it and redo "
                    "the change on a new branch"
                ) from None
            self.book.forget(entry.label)
            raise ToolError(
                f"conflict: branch {entry.label!r} was not committed and is now aborted: "
                f"{what}; nothing landed. Create a new branch from the current state and "
                "redo the change there"
            ) from None
        self.book.forget(entry.label)
        return CommitResult(
            label=entry.label, committed=True, into=into,
            created=list(changes.created), modified=list(changes.modified),
            deleted=list(changes.deleted),
            note="" if changes else "the branch had no changes; nothing to land",
        )

    def abort(self, label: str) -> AbortResult:
        entry = self.book.get(label)
        return AbortResult(label=entry.label, aborted=self.book.abort(entry.label))

    # -- explore ---------------------------------------------------------------------------
    def explore(
        self,
        commands: list[str],
        mode: Literal["first_success", "best_score"],
        test: str | None,
        commit: bool,
        timeout_s: float | None,
    ) -> ExploreResult:
        if not commands:
            raise ToolError("commands must list at least one shell command")
        if len(commands) > MAX_CANDIDATES:
            raise ToolError(f"at most {MAX_CANDIDATES} commands per explore call")
        if mode not in ("first_success", "best_score"):
            raise ToolError("mode must be 'first_success' or 'best_score'")
        commands = [check_command(c, f"commands[{i}]") for i, c in enumerate(commands)]
        if test is not None:
            test = check_command(test, "test")
        timeout = check_timeout(timeout_s, self.options.run_timeout_s)
        if self.book.closed:
            raise ToolError("the server is shutting down")
        candidates = [
            CommandCandidate(
                _script(command, test), workspace_path=str(self.ws.path),
                env=dict(os.environ), limits=self.options.limits, score_fd=True,
                label=f"candidate {i}", network=self.options.network,
            )
            for i, command in enumerate(commands)
        ]
        if commit and mode == "first_success":
            pattern: Any = Speculate(candidates, timeout=timeout)
        else:
            pattern = BestOfN(candidates, commit=commit, timeout=timeout)
        try:
            outcome = pattern(self.ws)
        except ResourceLimitError as exc:
            raise ToolError(f"limits cannot be enforced here: {one_line(exc)}") from None
        reports = [_report(r, commands) for r in outcome.all_results]
        winner = outcome.winner.branch_index if outcome.winner is not None else None
        if winner is None:
            note = "no candidate succeeded; nothing landed"
        elif outcome.committed:
            note = f"candidate {winner} won and its changes are in the workspace"
        else:
            note = f"candidate {winner} would win; commit=false, so nothing landed"
        return ExploreResult(
            mode=mode, committed=bool(outcome.committed), winner=winner,
            candidates=reports, duration_s=round(outcome.duration, 3), note=note,
        )

    def close(self) -> None:
        self.book.close()


def _script(command: str, test: str | None) -> list[str]:
    """One candidate: the command, then (if it succeeded) the test, in one sandbox.

    Passed as positional parameters, never pasted into a script, so no quoting can
    break out. A score written to fd 3 (``echo 0.8 >&3``) ranks ``best_score``."""
    if test is None:
        return ["/bin/sh", "-c", command]
    return ["/bin/sh", "-c", '/bin/sh -c "$1" && /bin/sh -c "$2"', "forkdeck-explore",
            command, test]


def _report(result: Any, commands: list[str]) -> CandidateReport:
    value = result.return_value
    exit_code = getattr(value, "exit_code", None)
    error = None
    if result.exception is not None:
        error = one_line(f"{error_name(result.exception)}: {result.exception}")
    elif result.error_context:
        error = cut(result.error_context, 1000)[0]
    return CandidateReport(
        index=result.branch_index, command=cut(commands[result.branch_index], 500)[0],
        status=result.status, success=bool(result.success),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        score=float(result.score), duration_s=round(float(result.duration), 3), error=error,
    )


__all__ = ["ForkdeckTools", "ServerOptions"]
