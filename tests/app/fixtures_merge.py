"""Shared data and hosts for the merge UI tests.

Two sources of reports:

* ``fixed_report()``: a report built from fixed file contents (fixed ids, labels and diffs
  in the builder's format), for snapshots that must not show tmp paths or random ids;
* ``run_fork()``: a real ``ForkCoordinator`` run, FunctionModel agents writing different
  files (and, through a real shell command, a binary file) in a real overlay workspace,
  reported by the real ``build_diff_report``.
"""

from __future__ import annotations

import difflib
import hashlib
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from branching_core.agent import LocalCommandRunner
from branching_core.fork import BranchSpec, ForkCoordinator
from branching_core.fork.types import BranchStatus
from branching_core.review.diff_report import build_diff_report
from branching_core.review.types import (
    BranchChange,
    BranchDiffAgreement,
    BranchDiffOperation,
    BranchDiffReport,
    BranchTestResult,
    DiffSummary,
    JudgeVerdict,
    PathDiff,
    ResolveOutcome,
)
from tests.fork.helpers import Scripted, call
from tests.support.typed import view_of

HOSTILE_NAME = "$(touch pwned)"
"""A file name that runs ``touch`` if anything ever hands it to a shell."""

# ---------------------------------------------------------------------------- fixed data

LABELS = {"b-1": "alpha", "b-2": "beta", "b-3": "gamma"}

_PARENT = {
    "README.md": "# Demo\n\nA tiny service.\n",
    "src/app.py": "def handler(x):\n    return x\n\n\nVALUE = 1\n",
    "docs/notes.txt": "old notes\n",
}
_PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(16))


def _diff(path: str, old: str | None, new: str | None) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True) if old is not None else [],
        new.splitlines(keepends=True) if new is not None else [],
        fromfile=f"a/{path}" if old is not None else "/dev/null",
        tofile=f"b/{path}" if new is not None else "/dev/null",
    )
    return "".join(lines)


def _change(bid: str, path: str, op: BranchDiffOperation, new: str | None) -> BranchChange:
    old = _PARENT.get(path)
    return BranchChange(
        branch_id=bid,
        label=LABELS[bid],
        path=path,
        operation=op,
        new_content=new,
        size=None if new is None else len(new.encode()),
        sha256=None if new is None else hashlib.sha256(new.encode()).hexdigest(),
        _diff="" if op == "untouched" else _diff(path, old, new),
    )


def _entry(path: str, agreement: BranchDiffAgreement, changes: dict[str, BranchChange]) -> PathDiff:
    branches = {
        bid: changes.get(bid) or BranchChange(bid, LABELS[bid], path, "untouched") for bid in LABELS
    }
    return PathDiff(
        path=path,
        parent_content=_PARENT.get(path),
        branches=branches,
        agreement=agreement,
        parent_exists=path in _PARENT,
    )


def fixed_report() -> BranchDiffReport:
    """Three branches, five paths: one split, one unanimous change, three unique (one binary,
    one deletion)."""
    readme = "# Demo\n\nA tiny service with retries.\n"
    binary = BranchChange(
        branch_id="b-2",
        label="beta",
        path="assets/logo.png",
        operation="created",
        is_binary=True,
        size=len(_PNG),
        sha256=hashlib.sha256(_PNG).hexdigest(),
        _diff=f"[binary · {len(_PNG)} bytes · sha256:{hashlib.sha256(_PNG).hexdigest()[:12]}]",
    )
    paths = [
        _entry("assets/logo.png", "unique", {"b-2": binary}),
        _entry(
            "docs/notes.txt", "unique", {"b-1": _change("b-1", "docs/notes.txt", "deleted", None)}
        ),
        _entry(
            "README.md",
            "unanimous_change",
            {
                "b-1": _change("b-1", "README.md", "modified", readme),
                "b-2": _change("b-2", "README.md", "modified", readme),
            },
        ),
        _entry(
            "src/app.py",
            "split",
            {
                "b-1": _change(
                    "b-1",
                    "src/app.py",
                    "modified",
                    "def handler(x):\n    return retry(x, attempts=3)\n\n\nVALUE = 1\n",
                ),
                "b-2": _change(
                    "b-2",
                    "src/app.py",
                    "modified",
                    "def handler(x):\n    return x\n\n\nVALUE = 2\n",
                ),
                "b-3": _change(
                    "b-3",
                    "src/app.py",
                    "modified",
                    "import logging\n\n\ndef handler(x):\n    logging.info(x)\n    return x\n\n\n"
                    "VALUE = 1\n",
                ),
            },
        ),
        _entry(
            "src/retry.py",
            "unique",
            {
                "b-3": _change(
                    "b-3",
                    "src/retry.py",
                    "created",
                    "def retry(fn, attempts=3):\n    for _ in range(attempts):\n"
                    "        try:\n            return fn()\n        except OSError:\n"
                    "            pass\n",
                )
            },
        ),
    ]
    paths.sort(key=lambda p: p.path)
    summary = DiffSummary(
        total_paths_touched=5,
        unanimous_change_paths=1,
        split_paths=1,
        unique_paths=3,
        binary_paths=1,
        agreement_score=0.8,
        per_branch_unique={"b-1": 1, "b-2": 1, "b-3": 1},
        per_branch_touched={"b-1": 3, "b-2": 3, "b-3": 2},
    )
    return BranchDiffReport(fork_id="fork-demo", paths=paths, summary=summary, labels=dict(LABELS))


def fixed_statuses() -> list[BranchStatus]:
    return [
        BranchStatus("b-1", "alpha", "done", model="offline", cost_usd=0.0123),
        BranchStatus("b-2", "beta", "budget_exhausted", model="offline", cost_usd=0.05),
        BranchStatus("b-3", "gamma", "failed", model="offline", cost_usd=None),
    ]


def fixed_outcome(report: BranchDiffReport | None = None) -> ResolveOutcome:
    """An above-threshold ``auto_with_fallback`` verdict for ``alpha`` with test results."""

    def tests(bid: str, passed: int, total: int) -> BranchTestResult:
        return BranchTestResult(
            branch_id=bid,
            label=LABELS[bid],
            command="pytest -q",
            source="junit",
            passed=passed,
            failed=total - passed,
            total=total,
            collected=total,
            exit_code=0 if passed == total else 1,
        )

    verdict = JudgeVerdict(
        winner="alpha",
        confidence=0.9,
        rationale="alpha wraps the handler in a retry and keeps every test green; "
        "beta only bumps a constant.",
        runner_up="gamma",
        concerns=["retry() is imported but defined only in gamma's branch"],
    )
    return ResolveOutcome(
        kind="auto_with_fallback",
        auto_eligible=True,
        verdict=verdict,
        verdicts=[verdict],
        winner_branch_id="b-1",
        winner_label="alpha",
        confidence=0.86,
        threshold=0.8,
        test_results={
            "b-1": tests("b-1", 12, 12),
            "b-2": tests("b-2", 11, 12),
            "b-3": tests("b-3", 9, 12),
        },
        report=report,
    )


# ---------------------------------------------------------------------------- real fork


@dataclass
class ForkRun:
    """A finished real fork: its coordinator, statuses, report and directories."""

    coordinator: ForkCoordinator
    project: Path
    statuses: list[BranchStatus]
    report: BranchDiffReport
    branch_dirs: dict[str, Path]


async def run_fork(project: Path, *, materialize: bool = False) -> ForkRun:
    """Three FunctionModel branches in a real overlay workspace on ``project``.

    ``a`` edits ``src/app.py`` and writes ``notes.md``; ``b`` edits ``src/app.py`` differently,
    rewrites the file named ``$(touch pwned)`` and deletes ``README.txt``; ``c`` writes the same
    ``notes.md`` as ``a`` and creates a binary ``logo.bin`` through a real shell command.
    """
    from branching_core.workspace import Workspace

    project.mkdir(parents=True, exist_ok=True)
    (project / "README.txt").write_text("hello\n")
    (project / "src").mkdir(exist_ok=True)
    (project / "src" / "app.py").write_text("VALUE = 1\n")
    (project / HOSTILE_NAME).write_text("original\n")
    scripted = Scripted(
        {
            "A": [
                call("write_file", path="src/app.py", content="VALUE = 2\n"),
                call("write_file", path="notes.md", content="shared notes\n"),
            ],
            "B": [
                call("write_file", path="src/app.py", content="VALUE = 3\n"),
                call("write_file", path=HOSTILE_NAME, content="hostile\n"),
                call("delete_file", path="README.txt"),
            ],
            "C": [
                call("write_file", path="notes.md", content="shared notes\n"),
                call("run_command", command="printf 'BIN\\000\\001\\002' > logo.bin"),
            ],
        }
    )
    coordinator = ForkCoordinator(
        Agent(scripted.model),
        workspace=Workspace(project),
        command_runner=LocalCommandRunner(),
        materialize=materialize,
    )
    await coordinator.fork(
        [BranchSpec("a", "A"), BranchSpec("b", "B"), BranchSpec("c", "C")], parent_history=[]
    )
    statuses = await coordinator.wait(timeout=30)
    assert coordinator.fork_id is not None
    report = build_diff_report(coordinator.fork_id, list(coordinator.branches.values()))
    dirs = {rt.label: view_of(rt) for rt in coordinator.branches.values()}
    return ForkRun(coordinator, project, list(statuses), report, dirs)


# ---------------------------------------------------------------------------- hosts


class ScreenHost(App[None]):
    """A bare app that pushes one screen on mount and records what it dismisses with."""

    def __init__(
        self,
        factory: Callable[[], Screen[Any]],
        on_result: Callable[[Any], None] | None = None,
    ) -> None:
        super().__init__()
        self.factory = factory
        self.results: list[Any] = []
        self.on_result = on_result or self.results.append

    def compose(self) -> ComposeResult:
        yield Static("host", id="host")

    def on_mount(self) -> None:
        self.push_screen(self.factory(), callback=self.on_result)


def recording_difftool(tmp_path: Path) -> tuple[str, Path]:
    """A real diff-tool stand-in: a Python script that writes its argv (JSON) to a file.

    Returns the ``FORKDECK_DIFFTOOL`` template and the file the argv lands in.
    """
    out = tmp_path / "difftool-argv.json"
    script = tmp_path / "record difftool.py"
    script.write_text(
        "import json, sys\n"
        f"with open({str(out)!r}, 'a') as fh:\n"
        "    fh.write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    template = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {{parent}} {{branches}}"
    return template, out
