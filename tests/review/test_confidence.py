"""compute_confidence: its documented reference points and edges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)

from branching_core.review import ConfidenceSignals, compute_confidence, count_retry_parts
from branching_core.review.confidence import (
    confidence_terms,
    convergence,
    count_tool_failures,
    health,
)
from branching_core.workspace import Workspace

from .forks import call, fork_with, project, ws

__all__ = ["project", "ws"]
THRESHOLD = 0.8


def conf(judge: float = 0.9, **kw: Any) -> float:
    return compute_confidence(ConfidenceSignals(**kw), judge)


def test_strong_evidence_reaches_the_threshold_with_and_without_tests() -> None:
    with_tests = conf(test_pass_ratio=1.0, convergence=1.0)
    without_tests = conf(convergence=1.0)
    assert without_tests >= THRESHOLD  # the seed's formula capped this case at 0.65 x judge
    assert with_tests > without_tests
    assert conf(test_pass_ratio=1.0) >= THRESHOLD  # tests alone corroborate too
    assert with_tests == pytest.approx(0.965, abs=0.001)
    assert without_tests == pytest.approx(0.860, abs=0.001)


def test_the_judge_alone_never_auto_merges() -> None:
    for judge in (0.5, 0.9, 0.95, 0.99, 1.0):
        assert conf(judge) < THRESHOLD
    assert conf(1.0) == conf(0.95)  # self-reported certainty is capped


def test_failing_tests_and_zero_collected_sink_any_pick() -> None:
    assert conf(1.0, test_pass_ratio=0.0, convergence=1.0) < 0.5
    assert conf(test_pass_ratio=0.5, convergence=1.0) < THRESHOLD
    ratios = [conf(test_pass_ratio=r / 10) for r in range(11)]
    assert ratios == sorted(ratios)  # more passing tests never lowers confidence


def test_disagreement_is_not_rewarded() -> None:
    values = [conf(convergence=c / 4) for c in range(5)]
    assert values == sorted(values)  # converging on the winner's result raises confidence
    assert conf(convergence=0.0) < conf()  # others doing something else is no evidence for it
    # the report's agreement score is carried along, not scored as "quality spread"
    assert conf(convergence=1.0, agreement=0.0) == conf(convergence=1.0, agreement=1.0)


def test_health_and_state_only_subtract() -> None:
    healthy = conf(test_pass_ratio=1.0, convergence=1.0)
    half = conf(test_pass_ratio=1.0, convergence=1.0, health=0.5)
    assert conf(test_pass_ratio=1.0, convergence=1.0, health=0.0) < THRESHOLD < half < healthy
    assert conf(test_pass_ratio=1.0, convergence=1.0, winner_state="failed") < THRESHOLD
    stopped = conf(test_pass_ratio=1.0, convergence=1.0, winner_state="budget_exhausted")
    assert conf(convergence=1.0) < stopped < healthy
    assert health(errors=0, retries=0, requests=0) == 1.0
    assert health(errors=1, retries=1, requests=4) == 0.5
    assert health(errors=5, retries=5, requests=2) == 0.0


def test_inputs_are_clamped_and_output_stays_in_range() -> None:
    assert 0.0 <= conf(-3.0, test_pass_ratio=-1.0, convergence=-1.0, health=-2.0) <= 1.0
    assert conf(7.0, test_pass_ratio=3.0, convergence=2.0, health=5.0) == conf(
        1.0, test_pass_ratio=1.0, convergence=1.0, health=1.0
    )
    terms = confidence_terms(ConfidenceSignals(), 0.9)
    assert set(terms) == {"judge", "health"}  # missing signals add nothing


def test_count_retry_parts_and_tool_failures() -> None:
    history = [
        ModelRequest.user_text_prompt("go"),
        ModelResponse(parts=[ToolCallPart("write_file", {}, tool_call_id="c1")]),
        ModelRequest(
            parts=[ToolReturnPart("write_file", "bad args", tool_call_id="c1", outcome="retried")]
        ),
        ModelResponse(parts=[ToolCallPart("read_file", {}, tool_call_id="c2")]),
        ModelRequest(
            parts=[ToolReturnPart("read_file", "boom", tool_call_id="c2", outcome="failed")]
        ),
        ModelResponse(parts=[TextPart("y")]),
        ModelRequest(parts=[RetryFeedbackPart("no output", retry=RetryInfo(cause="no_output"))]),
    ]
    assert count_retry_parts(history) == 2
    assert count_tool_failures(history) == 1
    assert count_retry_parts([]) == count_tool_failures([]) == 0


async def test_convergence_from_a_real_report(ws: Workspace, project: Path) -> None:
    coord = await fork_with(
        ws,
        {
            "a": [call("write_file", path="src/app.py", content="VALUE = 2\n")],
            "b": [call("write_file", path="src/app.py", content="VALUE = 2\n")],
            "c": [call("write_file", path="src/app.py", content="VALUE = 3\n")],
            "d": [call("write_file", path="other.txt", content="d\n")],
        },
    )
    report = coord.diff_report()
    ids = {rt.label: rt.branch_id for rt in coord.branches.values()}
    assert convergence(report, ids["a"]) == pytest.approx(0.5)  # b agrees, c does not
    assert convergence(report, ids["c"]) == 0.0
    assert convergence(report, ids["d"]) is None  # nobody else touched its paths
    await coord.abort_fork()
