"""Race external agents, one per copy-on-write branch, and land the one the pick chooses.

``AgentRace`` makes one sibling branch per entry (all in one request), starts every
agent (``AgentRun``), watches them (a wall-clock budget per branch, a cost budget where
the agent reports its cost), runs the test command in each branch that finished, then
picks (``pick``) and commits the winner into the workspace; every other branch is
aborted, so a killed or losing agent leaves nothing. With ``pick="first"`` the first
agent to exit 0 wins at once and the others are killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branching_core.errors import InvalidArgumentError, error_name
from branching_core.external.pick import PICKS, Chooser, pick_winner
from branching_core.external.profiles import AgentProfile
from branching_core.external.runner import AgentRun, LineCallback, strip_ansi

EventCallback = Callable[[str, "AgentRun"], None]  # ("started"|"ended", run)


@dataclass
class BranchReport:
    """One branch's outcome, as ``--json`` prints it."""

    label: str
    agent: str
    status: str
    exit_code: int | None
    duration_s: float
    cost_usd: float | None
    changed: list[str]
    tests: dict[str, Any] | None
    landed: bool = False
    error: str | None = None
    output_tail: list[str] = field(default_factory=list)
    session_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label, "agent": self.agent, "status": self.status,
            "exit_code": self.exit_code, "duration_s": round(self.duration_s, 3),
            "cost_usd": self.cost_usd, "changed": self.changed, "tests": self.tests,
            "landed": self.landed, "error": self.error, "session_id": self.session_id,
        }


@dataclass
class RaceOutcome:
    """What the race did: the winner's label (None: nothing landed) and every branch."""

    winner: str | None
    branches: list[BranchReport]
    pick: str
    test_command: str | None
    started_all_s: float = 0.0  # from the race's start until every agent was running
    landed_s: float = 0.0  # from the winner's pick until its files were in the workspace
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "command": "agents", "winner": self.winner, "pick": self.pick,
            "test_command": self.test_command, "note": self.note,
            "started_all_s": round(self.started_all_s, 3), "landed_s": round(self.landed_s, 3),
            "branches": [b.to_json() for b in self.branches],
        }


def branch_labels(profiles: Sequence[AgentProfile], n: int) -> list[str]:
    """``claude``, ``codex``... (``claude-1``, ``claude-2`` when a name repeats)."""
    names = [p.name for p in profiles for _ in range(n)]
    out = []
    for index, name in enumerate(names):
        base = re.sub(r"[^A-Za-z0-9_-]", "-", name) or "agent"
        if names.count(name) > 1:
            base = f"{base}-{names[:index + 1].count(name)}"
        out.append(base)
    return out


class AgentRace:
    """See the module docstring; ``run()`` does it all, ``steer``/``kill`` act meanwhile."""

    def __init__(
        self,
        workspace: Any,
        profiles: Sequence[AgentProfile],
        prompt: str,
        *,
        n: int = 1,
        pick: str = "tests",
        test_command: str | None = None,
        test_timeout: float = 300.0,
        timeout: float | None = None,
        cost_budget_usd: float | None = None,
        session: str | None = None,
        on_line: LineCallback | None = None,
        on_event: EventCallback | None = None,
        chooser: Chooser | None = None,
        judge_model: Any = None,
        limits: Any = None,
    ) -> None:
        if pick not in PICKS:
            raise InvalidArgumentError(f"pick must be one of {', '.join(PICKS)}, not {pick!r}")
        if not profiles:
            raise InvalidArgumentError("no agent given")
        if n < 1:
            raise InvalidArgumentError(f"n must be at least 1, got {n}")
        self.ws = workspace
        self.profiles = list(profiles)
        self.prompt = prompt
        self.n = n
        self.pick = pick
        self.test_command = test_command
        self.test_timeout = test_timeout
        self.timeout = timeout
        self.cost_budget_usd = cost_budget_usd
        self.session = session
        self.on_line = on_line
        self.on_event = on_event
        self.chooser = chooser
        self.judge_model = judge_model
        self.limits = limits  # ResourceLimits for profiles that set none of their own
        self.runs: dict[str, AgentRun] = {}
        self._cancel = threading.Event()
        self._tag = uuid.uuid4().hex[:6]

    # -- control while running --------------------------------------------------------------
    def steer(self, label: str, text: str) -> bool:
        run = self.runs.get(label)
        return run is not None and run.steer(text)

    def kill(self, label: str) -> bool:
        run = self.runs.get(label)
        if run is None or not run.running:
            return False
        run.kill("killed", "killed by the user")
        return True

    def cancel(self) -> None:
        """Stop everything: every agent is killed and nothing lands."""
        self._cancel.set()

    # -- the race ---------------------------------------------------------------------------
    def run(self) -> RaceOutcome:
        began = time.monotonic()
        labels = branch_labels(self.profiles, self.n)
        entries = [p for p in self.profiles for _ in range(self.n)]
        names = [f"agent-{self._tag}-{label}" for label in labels]
        branches = self.ws.branch_many(names, on_success=None, on_error=None)
        errors: dict[str, str] = {}
        landed_s = 0.0
        winner: str | None = None
        note = ""
        try:
            for label, profile, branch in zip(labels, entries, branches, strict=True):
                try:
                    run = AgentRun(label, profile, branch, self.prompt, mount_at=self.ws.path,
                                   session=self.session, on_line=self.on_line,
                                   limits=self.limits)
                except Exception as exc:  # not installed, bad expose...: this branch only
                    errors[label] = f"{error_name(exc)}: {exc}"
                    continue
                self.runs[label] = run
                if self.on_event is not None:
                    self.on_event("started", run)
            started_all = time.monotonic() - began
            first = self._watch()
            if self._cancel.is_set():
                note = "cancelled: every agent was killed, nothing landed"
                return self._outcome(labels, entries, branches, errors, None, started_all,
                                     0.0, note)
            tests = self._run_tests()
            changed = {label: self._changed(run) for label, run in self.runs.items()}
            if self.pick == "first":
                winner = first
                note = "" if first else "no agent exited 0"
            else:
                winner, note = pick_winner(self.pick, self.runs, tests, changed,
                                           parent=str(self.ws.path),
                                           chooser=self.chooser, prompt=self.prompt,
                                           judge_model=self.judge_model)
            if winner is not None:
                t0 = time.monotonic()
                self.runs[winner].ws_branch.commit()
                landed_s = time.monotonic() - t0
            return self._outcome(labels, entries, branches, errors, winner, started_all,
                                 landed_s, note, tests, changed)
        finally:
            for run in self.runs.values():
                run.close()
            for branch in branches:
                if branch.is_open:
                    with contextlib.suppress(Exception):
                        branch.abort()

    def _watch(self) -> str | None:
        """Wait for every agent; enforce the budgets; with ``first``, the first to exit 0
        wins and the rest are killed (its label is returned)."""
        pending = set(self.runs)
        while pending:
            if self._cancel.is_set():
                for label in pending:
                    self.runs[label].kill("killed", "cancelled")
                return None
            for label in sorted(pending):
                run = self.runs[label]
                if run.poll():
                    pending.discard(label)
                    if self.on_event is not None:
                        self.on_event("ended", run)
                    if self.pick == "first" and run.status.exit_code == 0:
                        for other in pending:
                            self.runs[other].kill("killed", f"{label} finished first")
                            if self.on_event is not None:
                                self.on_event("ended", self.runs[other])
                        return label
                    continue
                budget = run.profile.timeout_s or self.timeout
                if budget is not None and run.duration > budget:
                    run.kill("timed-out", f"over its {budget:g} s wall-clock budget")
                cost_cap = run.profile.cost_budget_usd or self.cost_budget_usd
                if cost_cap is not None and (run.cost_usd or 0.0) > cost_cap:
                    run.kill("over-budget", f"reported ${run.cost_usd:.4f} > ${cost_cap:g}")
            time.sleep(0.05)
        return None

    def _run_tests(self) -> dict[str, Any]:
        """The test command in every branch whose agent exited 0 (in parallel)."""
        if not self.test_command:
            return {}
        from branching_core.review.branch_tests import run_test_in_dir

        done = [run for run in self.runs.values()
                if run.status.state == "exited" and run.status.exit_code == 0]

        async def all_tests() -> list[Any]:
            assert self.test_command is not None
            return await asyncio.gather(*(
                run_test_in_dir(run.branch_id, run.label, self.test_command,
                                Path(run.ws_branch.path), timeout=self.test_timeout,
                                in_place=True)
                for run in done))

        results = asyncio.run(all_tests()) if done else []
        return {result.label: result for result in results}

    @staticmethod
    def _changed(run: AgentRun) -> list[str]:
        """The paths the agent changed; ``.git`` internals are the repository's, not the
        agent's work (an agent's ``git add`` or config write is no change to review)."""
        try:
            paths = run.ws_branch.changes().all_paths
        except Exception:
            return []
        return [p for p in paths if p != ".git" and not p.startswith(".git/")]

    def _outcome(self, labels: list[str], entries: list[AgentProfile], branches: list[Any],
                 errors: dict[str, str], winner: str | None, started_all: float,
                 landed_s: float, note: str, tests: dict[str, Any] | None = None,
                 changed: dict[str, list[str]] | None = None) -> RaceOutcome:
        reports = []
        for label, profile in zip(labels, entries, strict=True):
            run = self.runs.get(label)
            result = (tests or {}).get(label)
            test_json = None if result is None else {
                "ok": result.ok, "passed": result.passed, "failed": result.failed,
                "total": result.total, "exit_code": result.exit_code,
                "timed_out": result.timed_out, "error": result.error}
            if run is None:
                reports.append(BranchReport(label, profile.name, "failed", None, 0.0, None, [],
                                            None, error=errors.get(label)))
                continue
            status = run.status.state
            if status == "exited":
                status = "succeeded" if run.status.exit_code == 0 else "failed"
            if label == winner:
                status = "landed"
            reports.append(BranchReport(
                label, profile.name, status, run.status.exit_code, run.duration, run.cost_usd,
                (changed or {}).get(label, []), test_json, landed=label == winner,
                error=run.status.error, output_tail=[strip_ansi(x) for x in run.tail(5)],
                session_id=run.session_id))
        return RaceOutcome(winner, reports, self.pick, self.test_command, started_all,
                           landed_s, note)


__all__ = ["AgentRace", "BranchReport", "RaceOutcome", "branch_labels"]
