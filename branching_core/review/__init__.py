"""Deciding a winner: diff reports, the diff-tool launcher, the judge (the on-disk mirror
is fork infrastructure, ``branching_core.fork.mirror``; its names are re-exported here).

The report/judge names are imported lazily: importing this package (e.g. for the editor
detector) does not import pydantic-ai.
"""

from __future__ import annotations

from branching_core._lazy import lazy_exports
from branching_core.review.editor import EditorDetector as EditorDetector
from branching_core.review.editor import EditorKind as EditorKind

_LAZY: dict[str, str] = {
    # seed-004 types (plain dataclasses; JudgeVerdict is a pydantic model)
    "AgreementLabel": "branching_core.review.types",
    "BranchChange": "branching_core.review.types",
    "BranchDiffAgreement": "branching_core.review.types",
    "BranchDiffOperation": "branching_core.review.types",
    "BranchDiffReport": "branching_core.review.types",
    "BranchOutcome": "branching_core.review.types",
    "BranchTestResult": "branching_core.review.types",
    "ConfidenceSignals": "branching_core.review.types",
    "DiffSummary": "branching_core.review.types",
    "JudgeVerdict": "branching_core.review.types",
    "PathDiff": "branching_core.review.types",
    "ResolveOutcome": "branching_core.review.types",
    # the live mirror for IDE diff tools
    "ForkMaterializer": "branching_core.fork.mirror.materializer",
    "recover_mirrors": "branching_core.fork.mirror.recovery",
    # the diff report
    "build_diff_report": "branching_core.review.diff_report",
    # tests in every branch, and finding the command by itself
    "run_branch_tests": "branching_core.review.branch_tests",
    "DetectedTestCommand": "branching_core.review.detect_tests",
    "detect_test_command": "branching_core.review.detect_tests",
    "choose_test_command": "branching_core.review.detect_tests",
    # the judge's track record and domain
    "record_judge_decision": "branching_core.review.judge_log",
    "judge_agreement": "branching_core.review.judge_log",
    "tune_confidence_threshold": "branching_core.review.judge_log",
    "judge_domain": "branching_core.review.domain",
    # confidence
    "compute_confidence": "branching_core.review.confidence",
    "count_retry_parts": "branching_core.review.confidence",
    # the judge and resolution
    "JudgeAgent": "branching_core.review.judge",
    "JUDGE_SYSTEM_PROMPT": "branching_core.review.judge",
    "resolve": "branching_core.review.resolver",
    "vote_panel": "branching_core.review.resolver",
    # how each branch worked (tool calls aligned across branches)
    "ProcessReport": "branching_core.review.process_report",
    "build_process_report": "branching_core.review.process_report",
}

# built from the lazy table so each name is declared once (pyright cannot follow that)
__all__ = sorted(["EditorDetector", "EditorKind", *_LAZY])  # pyright: ignore[reportUnsupportedDunderAll]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
