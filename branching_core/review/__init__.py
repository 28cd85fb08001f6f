"""Deciding a winner: diff reports, the diff-tool launcher, the judge (the on-disk mirror
is fork infrastructure, ``branching_core.fork.mirror``; its names are re-exported here).

The report/judge names are imported lazily: importing this package (e.g. for the editor
detector) does not import pydantic-ai.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from branching_core._lazy import lazy_exports
from branching_core.review.editor import EditorDetector as EditorDetector
from branching_core.review.editor import EditorKind as EditorKind

if TYPE_CHECKING:  # the real types for pyright; at run time ``__getattr__`` loads them
    from branching_core.review.branch_tests import run_branch_tests as run_branch_tests
    from branching_core.review.confidence import compute_confidence as compute_confidence
    from branching_core.review.confidence import count_retry_parts as count_retry_parts
    from branching_core.review.detect_tests import DetectedTestCommand as DetectedTestCommand
    from branching_core.review.detect_tests import choose_test_command as choose_test_command
    from branching_core.review.detect_tests import detect_test_command as detect_test_command
    from branching_core.review.diff_report import build_diff_report as build_diff_report
    from branching_core.review.domain import judge_domain as judge_domain
    from branching_core.review.judge import JUDGE_SYSTEM_PROMPT as JUDGE_SYSTEM_PROMPT
    from branching_core.review.judge import JudgeAgent as JudgeAgent
    from branching_core.review.judge_log import judge_agreement as judge_agreement
    from branching_core.review.judge_log import record_judge_decision as record_judge_decision
    from branching_core.review.judge_log import (
        tune_confidence_threshold as tune_confidence_threshold,
    )
    from branching_core.review.process_report import ProcessMoment as ProcessMoment
    from branching_core.review.process_report import ProcessReport as ProcessReport
    from branching_core.review.process_report import ToolStep as ToolStep
    from branching_core.review.process_report import build_process_report as build_process_report
    from branching_core.review.resolver import resolve as resolve
    from branching_core.review.resolver import vote_panel as vote_panel
    from branching_core.review.types import AgreementLabel as AgreementLabel
    from branching_core.review.types import BranchChange as BranchChange
    from branching_core.review.types import BranchDiffAgreement as BranchDiffAgreement
    from branching_core.review.types import BranchDiffOperation as BranchDiffOperation
    from branching_core.review.types import BranchDiffReport as BranchDiffReport
    from branching_core.review.types import BranchOutcome as BranchOutcome
    from branching_core.review.types import BranchTestResult as BranchTestResult
    from branching_core.review.types import ConfidenceSignals as ConfidenceSignals
    from branching_core.review.types import DiffSummary as DiffSummary
    from branching_core.review.types import JudgeVerdict as JudgeVerdict
    from branching_core.review.types import PathDiff as PathDiff
    from branching_core.review.types import ResolveOutcome as ResolveOutcome

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
    "ProcessMoment": "branching_core.review.process_report",
    "ToolStep": "branching_core.review.process_report",
    "build_process_report": "branching_core.review.process_report",
}

# built from the lazy table so each name is declared once (pyright cannot follow that)
__all__ = sorted(["EditorDetector", "EditorKind", *_LAZY])  # pyright: ignore[reportUnsupportedDunderAll]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
