"""The review types: the cross-branch diff report, the judge's verdict, test results and the
outcome of ``resolve`` (names and fields follow the forking API reference, seed 004).

Plain dataclasses (cheap to import, no pydantic-ai) except ``JudgeVerdict``, which is a
pydantic model because pydantic-ai needs a schema for structured output. A UI can import
this module without importing pydantic-ai.

Where we differ from the seed, on purpose:

* a branch that renames a file gets *one* ``BranchChange`` with ``operation="renamed"`` and
  ``old_path`` (the seed shows a delete plus a create);
* ``BranchChange.unified_diff_vs_parent`` is computed on first access (and shared between
  branches that produced identical content), so building a report for many branches only
  reads and hashes files;
* the judge names the winner by *label* (``JudgeVerdict.winner``); a branch id is accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

BranchDiffAgreement = Literal["unanimous_change", "unanimous_no_change", "split", "unique"]
"""How the branches relate on one path.

* ``unanimous_change``: two or more branches touched the path and all ended identical;
* ``unanimous_no_change``: no branch touched it (only for paths asked for explicitly);
* ``split``: two or more branches touched it and their end states differ;
* ``unique``: exactly one branch touched it.
"""

AgreementLabel = BranchDiffAgreement

BranchDiffOperation = Literal["created", "modified", "deleted", "renamed", "untouched"]
"""What one branch did to a path, relative to the parent (end state, not event log).
``renamed``: the branch removed ``old_path`` and created this path with the same bytes."""

TestSource = Literal["junit", "jest-json", "go-json", "cargo", "exit_code", "none"]
"""Where a branch's passed/total came from: the runner's JUnit XML report (pytest, node
--test), jest's JSON report, ``go test -json`` events, cargo's summary lines, the exit code
(any other command), or nowhere (timed out / could not start)."""

UserEditMark = Literal["edited", "conflict"]
"""How the user's own edits (in a branch's mirror, fork/mirror/edits.py) touched a path."""

USER_EDIT_TEXT: dict[str, str] = {
    "edited": "edited by the user in their editor; the branch holds the user's version",
    "conflict": "the user's edit conflicted with the branch's change; the branch's version "
    "is shown, the user's is kept aside",
}
"""What the model and the judge read for each :data:`UserEditMark`."""

ResolveKind = Literal["manual", "auto", "auto_with_fallback", "vote"]


@dataclass
class BranchChange:
    """One branch's end state for one path of a ``BranchDiffReport``.

    ``path`` is where the content lives in the branch (for a rename: the new path);
    ``old_path`` is set only for ``renamed``. ``new_content`` is the text after the branch's
    changes (``None`` for binary, deleted or untouched). ``size``/``sha256`` describe the
    branch's bytes (``None`` when the path is absent). ``unified_diff_vs_parent`` is a
    stdlib unified diff, a ``[binary · N bytes · sha256:…]`` placeholder, or a head/tail
    preview when the diff is longer than the report's line cap; it is computed lazily.
    """

    branch_id: str
    label: str
    path: str
    operation: BranchDiffOperation
    old_path: str | None = None
    new_content: str | None = None
    is_binary: bool = False
    size: int | None = None
    sha256: str | None = None
    diff_lines_truncated: int = 0
    user_edit: UserEditMark | None = None
    """``"edited"``: the user changed this path in the branch's mirror directory (their IDE)
    and the branch holds their version; ``"conflict"``: the user's edit met a branch change
    and was kept aside (the branch's version is shown). ``None``: the branch's own work."""
    _diff: str | None = field(default=None, repr=False, compare=False)
    _diff_factory: Callable[[], tuple[str, int]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def kind(self) -> BranchDiffOperation:
        """Alias of ``operation``."""
        return self.operation

    @property
    def touched(self) -> bool:
        return self.operation != "untouched"

    @property
    def unified_diff_vs_parent(self) -> str:
        if self._diff is None:
            if self._diff_factory is None:
                self._diff = ""
            else:
                self._diff, self.diff_lines_truncated = self._diff_factory()
                self._diff_factory = None
        return self._diff


@dataclass
class PathDiff:
    """One path of a ``BranchDiffReport``: the parent's state and every branch's outcome.

    ``branches`` is keyed by branch id with one entry per branch of the fork (``untouched``
    for those that left the path alone). ``parent_content`` is ``None`` when the path is
    new in the branches or binary; ``parent_exists`` tells the two apart.
    """

    path: str
    parent_content: str | None
    branches: dict[str, BranchChange]
    agreement: BranchDiffAgreement
    parent_exists: bool = False
    parent_is_binary: bool = False
    parent_size: int | None = None
    parent_sha256: str | None = None

    def by_label(self, label: str) -> BranchChange | None:
        """The change of the branch labelled ``label`` (``None`` if no such branch)."""
        for change in self.branches.values():
            if change.label == label:
                return change
        return None

    @property
    def touched_by(self) -> list[str]:
        """Ids of the branches that changed this path."""
        return [bid for bid, c in self.branches.items() if c.touched]


@dataclass
class DiffSummary:
    """Aggregate metrics of a ``BranchDiffReport``.

    ``agreement_score = 1 - split_paths / max(total_paths_touched, 1)`` (seed 004): only
    contested paths (``split``) count against it; ``unique`` paths count toward neither.
    ``per_branch_unique`` counts, per branch id, the paths only that branch touched.
    """

    total_paths_touched: int = 0
    unanimous_change_paths: int = 0
    unanimous_no_change_paths: int = 0
    split_paths: int = 0
    unique_paths: int = 0
    renamed_paths: int = 0
    binary_paths: int = 0
    agreement_score: float = 1.0
    per_branch_unique: dict[str, int] = field(default_factory=dict)
    per_branch_touched: dict[str, int] = field(default_factory=dict)


@dataclass
class BranchDiffReport:
    """Typed cross-branch diff: one ``PathDiff`` per touched path (sorted) plus a summary.

    ``labels`` maps branch id to label, in fork order.
    """

    fork_id: str
    paths: list[PathDiff]
    summary: DiffSummary
    labels: dict[str, str] = field(default_factory=dict)

    def path(self, path: str) -> PathDiff | None:
        """The entry for ``path`` (``None`` if the report has none)."""
        for entry in self.paths:
            if entry.path == path:
                return entry
        return None

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data (what the ``diff_branches`` tool gives the
        model, and ``ForkCoordinator.diff()`` returns).

        Per path: its ``agreement`` and, for each branch that touched it, the ``label``,
        ``operation`` (with ``old_path`` for a rename) and unified ``diff`` (capped like the
        report's diffs). A branch whose diff is the same as an earlier branch's on that path
        gets ``"same_as": <label>`` instead of a second copy, so agreeing branches do not
        multiply what the model has to read.
        """
        paths = []
        for entry in self.paths:
            branches: dict[str, dict[str, Any]] = {}
            seen: dict[str, str] = {}
            for bid, change in entry.branches.items():
                if not change.touched:
                    continue
                item: dict[str, Any] = {"label": change.label, "operation": change.operation}
                if change.old_path is not None:
                    item["old_path"] = change.old_path
                if change.user_edit is not None:
                    item["user_edit"] = USER_EDIT_TEXT[change.user_edit]
                diff = change.unified_diff_vs_parent
                if diff in seen:
                    item["same_as"] = seen[diff]
                else:
                    seen[diff] = change.label
                    item["diff"] = diff
                branches[bid] = item
            paths.append({"path": entry.path, "agreement": entry.agreement, "branches": branches})
        s = self.summary
        out: dict[str, Any] = {"fork_id": self.fork_id, "paths": paths}
        edited = self.user_edited()
        if edited:
            out["edited_by_user"] = edited
        out["summary"] = {
            "total_paths_touched": s.total_paths_touched,
            "split_paths": s.split_paths,
            "unique_paths": s.unique_paths,
            "unanimous_change_paths": s.unanimous_change_paths,
            "renamed_paths": s.renamed_paths,
            "agreement_score": s.agreement_score,
        }
        return out

    def user_edited(self) -> dict[str, list[str]]:
        """label -> the report's paths the user edited in that branch's mirror (applied or
        conflicting): what a front end marks "edited by you"."""
        out: dict[str, list[str]] = {}
        for entry in self.paths:
            for change in entry.branches.values():
                if change.user_edit is not None and change.path == entry.path:
                    out.setdefault(change.label, []).append(entry.path)
        return out

    def changes_of(self, key: str) -> list[BranchChange]:
        """Every touched-path change of one branch (by id or label), in path order."""
        bid = (
            key
            if key in self.labels
            else next((b for b, label in self.labels.items() if label == key), key)
        )
        out = []
        for entry in self.paths:
            change = entry.branches.get(bid)
            if change is not None and change.touched and change.path == entry.path:
                out.append(change)
        return out


class JudgeVerdict(BaseModel):
    """The judge's structured answer (pydantic-ai ``output_type``).

    ``winner`` is a branch *label* exactly as listed in the prompt (a branch id is accepted
    too); ``confidence`` is the judge's own confidence in its pick, 0..1.
    """

    winner: str = Field(description="Label of the winning branch, exactly as listed.")
    confidence: float = Field(ge=0.0, le=1.0, description="Your confidence in the pick, 0..1.")
    rationale: str = Field(default="", description="Why this branch wins, briefly.")
    runner_up: str | None = Field(default=None, description="Label of the second-best branch.")
    concerns: list[str] = Field(
        default_factory=list, description="Problems a reviewer should check before merging."
    )


@dataclass
class BranchTestResult:
    """One branch's run of ``test_command``.

    ``source="junit"``: counts come from pytest's JUnit XML; ``"exit_code"``: one synthetic
    test, passed iff the command exited 0; ``"none"``: no result (timed out, could not
    start, branch has no view). ``collected`` is the number of tests the runner found;
    zero collected is *not* a pass.
    """

    branch_id: str
    label: str
    command: str
    source: TestSource
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    total: int = 0
    collected: int = 0
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    output_tail: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Every collected test passed, at least one test ran, and the command exited 0."""
        return (
            self.source != "none"
            and self.collected > 0
            and self.passed == self.total
            and (self.exit_code == 0)
        )

    @property
    def pass_ratio(self) -> float | None:
        """``passed / total``; ``0.0`` when nothing was collected (a test command that tests
        nothing is failing evidence, not a pass); ``None`` when there is no result."""
        if self.source == "none":
            return None
        if self.collected == 0 or self.total == 0:
            return 0.0
        return self.passed / self.total


@dataclass
class BranchOutcome:
    """What the judge sees about one branch: narrow on purpose (no message history)."""

    branch_id: str
    label: str
    state: str
    final_message: str | None = None
    cost_usd: float | None = None
    turns: int = 1
    requests: int = 0
    tool_calls: int = 0
    error_count: int = 0
    retry_count: int = 0
    error: str | None = None
    tests: BranchTestResult | None = None


@dataclass
class ConfidenceSignals:
    """The evidence ``compute_confidence`` combines (see its docstring for the formula).

    ``test_pass_ratio`` is the winner's passed/total (``None``: no test signal);
    ``health`` is the winner's ``1 - (errors + retries) / max(turns, 1)`` clamped to 0..1;
    ``convergence`` is how far the other branches' results agree with the winner's on the
    paths the winner changed (``None`` when no other branch touched them); ``agreement`` is
    the report's ``agreement_score`` (reported, not rewarded as spread).
    """

    test_pass_ratio: float | None = None
    health: float = 1.0
    convergence: float | None = None
    agreement: float = 1.0
    winner_state: str = "done"


@dataclass
class ResolveOutcome:
    """What ``resolve`` did.

    * ``committed=True``: the merge already ran (``auto``, ``vote``); see ``merge_result``.
    * ``committed=False, auto_eligible=True``: ``auto_with_fallback`` above the threshold;
      the caller confirms with ``merge_or_select(f"pick:{winner_label}")``.
    * ``committed=False, auto_eligible=False``: ``manual``, or a judge pick below the
      threshold (the picker opens preselected on ``winner_label``), or a judge that could
      not name a branch (``fallback_reason`` says why).

    ``judge_usage`` holds one pydantic-ai ``RunUsage`` per judge run (several for ``vote``
    or a re-ask), kept apart from the branches' own usage.
    """

    kind: ResolveKind
    committed: bool = False
    auto_eligible: bool = False
    verdict: JudgeVerdict | None = None
    verdicts: list[JudgeVerdict] = field(default_factory=list)
    winner_branch_id: str | None = None
    winner_label: str | None = None
    confidence: float | None = None
    threshold: float = 0.8
    signals: ConfidenceSignals | None = None
    merge_result: Any = None
    judge_usage: list[Any] = field(default_factory=list)
    test_results: dict[str, BranchTestResult] = field(default_factory=dict)
    goal: str | None = None
    """What the judge was told the branches were asked to do."""
    domain: str | None = None
    """``code`` or ``writing``: which judge instructions were used (``judge_domain``)."""
    process: Any = None
    """The ``ProcessReport`` (each branch's tool calls); the judge saw its ``summary()``."""
    test_command: Any = None
    """The ``DetectedTestCommand`` that ran (``source="config"`` when it was configured or
    passed in; a file name when detected), ``None`` when no test command was found."""
    fallback_reason: str | None = None
    report: BranchDiffReport | None = None

    @property
    def needs_manual(self) -> bool:
        """The caller has to pick (picker preselected on ``winner_label`` if set)."""
        return not self.committed and not self.auto_eligible


__all__ = [
    "AgreementLabel",
    "BranchChange",
    "BranchDiffAgreement",
    "BranchDiffOperation",
    "BranchDiffReport",
    "BranchOutcome",
    "BranchTestResult",
    "ConfidenceSignals",
    "DiffSummary",
    "JudgeVerdict",
    "PathDiff",
    "ResolveKind",
    "ResolveOutcome",
    "TestSource",
]
