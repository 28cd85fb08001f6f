"""The merge judge and resolve(): real coordinators, branch agents and judges on FunctionModels."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic_ai.models.test import TestModel

from branching_core.config import Settings
from branching_core.errors import ConfigError
from branching_core.fork import MergeStrategy
from branching_core.review import JudgeAgent, resolve, vote_panel
from branching_core.review.judge import MAX_JUDGE_PROMPT_CHARS, build_judge_prompt
from branching_core.review.resolver import branch_outcome
from branching_core.workspace import Workspace

from .forks import JudgeScript, call, fork_with, project, runner, verdict, ws

__all__ = ["project", "runner", "ws"]

PYTEST = f"{sys.executable} -m pytest -q"


async def two_ways(ws: Workspace, **kw):
    return await fork_with(
        ws,
        {
            "tidy": [call("write_file", path="src/app.py", content="VALUE = 2\n")],
            "wild": [
                call("write_file", path="src/app.py", content="VALUE = 99\n"),
                call("write_file", path="wild.txt", content="chaos\n"),
            ],
        },
        **kw,
    )


async def test_judge_answering_with_a_label_merges_that_branch(
    ws: Workspace, project: Path
) -> None:
    coord = await two_ways(ws)
    branch_requests = {rt.label: rt.meter.requests for rt in coord.branches.values()}
    judge = JudgeScript([verdict("tidy", 0.7, "smallest correct change")])
    outcome = await resolve(coord, MergeStrategy(kind="auto"), judges=[judge.model])
    assert outcome.committed and outcome.winner_label == "tidy"
    assert outcome.verdict is not None and outcome.verdict.winner == "tidy"
    assert outcome.merge_result.winner_label == "tidy"
    assert (project / "src/app.py").read_text() == "VALUE = 2\n"
    assert not (project / "wild.txt").exists()
    assert coord.is_resolved and judge.asked == 1
    # the judge's usage is reported on its own; the branches' meters never saw it
    assert len(outcome.judge_usage) == 1 and outcome.judge_usage[0].requests == 1
    assert {rt.label: rt.meter.requests for rt in coord.branches.values()} == branch_requests
    assert branch_requests == {"tidy": 2, "wild": 3}


async def test_merge_or_select_auto_merges_the_judges_pick(ws: Workspace, project: Path) -> None:
    coord = await two_ways(ws)
    judge = JudgeScript([verdict("wild", 0.8)])
    result = await coord.merge_or_select("auto", judges=[judge.model])
    assert result.winner_label == "wild" and (project / "wild.txt").read_text() == "chaos\n"

    undecided = await two_ways(ws)
    garbage = JudgeScript([verdict("nobody"), verdict("still nobody")])
    with pytest.raises(RuntimeError, match="did not pick a branch"):
        await undecided.merge_or_select("auto", judges=[garbage.model])
    assert not undecided.is_resolved and garbage.asked == 2
    await undecided.aclose()


async def test_a_branch_id_works_too(ws: Workspace, project: Path) -> None:
    coord = await two_ways(ws)
    wild_id = coord.get_branch("wild").branch_id
    judge = JudgeScript([verdict(f" `{wild_id}` ")])
    outcome = await coord.resolve(MergeStrategy(kind="auto"), judges=[judge.model])
    assert outcome.committed and outcome.winner_branch_id == wild_id
    assert (project / "wild.txt").read_text() == "chaos\n"


async def test_garbage_is_asked_again_once_then_falls_back_to_manual(
    ws: Workspace, project: Path
) -> None:
    coord = await two_ways(ws)
    judge = JudgeScript([verdict("branch-7f3a"), verdict("the first one")])
    outcome = await resolve(coord, MergeStrategy(kind="auto"), judges=[judge.model])
    assert judge.asked == 2
    assert "'branch-7f3a' is not one of the branches" in judge.prompts[1]
    assert "tidy, wild" in judge.prompts[1]
    assert not outcome.committed and not outcome.auto_eligible and outcome.needs_manual
    assert outcome.winner_label is None and outcome.merge_result is None
    assert "not a branch" in (outcome.fallback_reason or "")
    assert len(outcome.judge_usage) == 2
    assert not coord.is_resolved  # nothing merged: the picker decides
    assert (project / "src/app.py").read_text() == "VALUE = 1\n"
    await coord.abort_fork()


async def test_second_answer_counts_when_the_first_was_wrong(ws: Workspace, project: Path) -> None:
    coord = await two_ways(ws)
    judge = JudgeScript([verdict("TIDY-branch"), verdict("Tidy")])  # case is forgiven
    outcome = await resolve(coord, MergeStrategy(kind="auto"), judges=[judge.model])
    assert judge.asked == 2 and outcome.committed and outcome.winner_label == "tidy"
    assert (project / "src/app.py").read_text() == "VALUE = 2\n"


async def test_strong_evidence_is_auto_eligible(ws: Workspace, project: Path) -> None:
    """Tests pass, judge 0.9, healthy branches converging on the same change."""
    (project / "test_app.py").write_text(
        "from src.app import VALUE\n\ndef test_value():\n    assert VALUE == 2\n"
    )
    (project / "src/__init__.py").write_text("")
    coord = await fork_with(
        ws,
        {
            label: [call("write_file", path="src/app.py", content="VALUE = 2\n")]
            for label in ("one", "two", "three")
        },
    )
    judge = JudgeScript([verdict("two", 0.9)])
    outcome = await resolve(
        coord, MergeStrategy(kind="auto_with_fallback"), judges=[judge.model], test_command=PYTEST
    )
    assert outcome.winner_label == "two"
    assert outcome.winner_branch_id is not None
    assert outcome.test_results[outcome.winner_branch_id].passed == 1
    assert outcome.signals is not None and outcome.signals.convergence == 1.0
    assert outcome.signals.test_pass_ratio == 1.0 and outcome.signals.health == 1.0
    assert outcome.confidence is not None and outcome.confidence >= 0.8
    assert outcome.auto_eligible and not outcome.committed  # the caller confirms (seed 004)
    assert (project / "src/app.py").read_text() == "VALUE = 1\n"
    result = await coord.merge_or_select(f"pick:{outcome.winner_label}")
    assert result.winner_label == "two" and (project / "src/app.py").read_text() == "VALUE = 2\n"


async def test_strong_evidence_with_commit_merges(ws: Workspace, project: Path) -> None:
    coord = await fork_with(
        ws,
        {label: [call("write_file", path="src/app.py", content="VALUE = 5\n")] for label in "xy"},
    )
    judge = JudgeScript([verdict("y", 0.95)])
    outcome = await resolve(
        coord, MergeStrategy(kind="auto_with_fallback"), judges=[judge.model], commit=True
    )
    assert outcome.auto_eligible and outcome.committed and outcome.winner_label == "y"
    assert (project / "src/app.py").read_text() == "VALUE = 5\n"


async def test_weak_evidence_falls_back_to_manual_preselected(ws: Workspace, project: Path) -> None:
    """A confident judge alone (no tests, branches disagree) is not enough to merge unasked."""
    coord = await two_ways(ws)
    judge = JudgeScript([verdict("wild", 0.9)])
    outcome = await resolve(
        coord, MergeStrategy(kind="auto_with_fallback"), judges=[judge.model], commit=True
    )
    assert outcome.winner_label == "wild"  # the picker opens on the judge's pick
    assert outcome.confidence is not None and outcome.confidence < 0.8
    assert not outcome.auto_eligible and not outcome.committed and outcome.needs_manual
    assert not coord.is_resolved and not (project / "wild.txt").exists()
    await coord.abort_fork()


async def test_failing_tests_block_auto_merge(ws: Workspace, project: Path) -> None:
    (project / "test_app.py").write_text(
        "from src.app import VALUE\n\ndef test_value():\n    assert VALUE == 3\n"
    )
    (project / "src/__init__.py").write_text("")
    coord = await fork_with(
        ws,
        {label: [call("write_file", path="src/app.py", content="VALUE = 2\n")] for label in "ab"},
    )
    judge = JudgeScript([verdict("a", 0.95)])
    settings = Settings(test_command=PYTEST, test_timeout_s=120.0)  # [review] in config.toml
    outcome = await resolve(
        coord, MergeStrategy(kind="auto_with_fallback"), judges=[judge.model], settings=settings
    )
    assert outcome.signals is not None and outcome.signals.test_pass_ratio == 0.0
    assert outcome.confidence is not None and outcome.confidence < 0.5
    assert not outcome.auto_eligible
    # the judge saw the test results
    assert "tests 0/1 passed (junit)" in judge.prompts[0]
    await coord.abort_fork()


async def test_vote_majority_wins(ws: Workspace, project: Path) -> None:
    coord = await two_ways(ws)
    judges = [
        JudgeScript([verdict("tidy", 0.6)], name="j1"),
        JudgeScript([verdict("wild", 0.99)], name="j2"),
        JudgeScript([verdict("tidy", 0.7)], name="j3"),
    ]
    outcome = await resolve(coord, MergeStrategy(kind="vote"), judges=[j.model for j in judges])
    assert outcome.committed and outcome.winner_label == "tidy"
    assert len(outcome.verdicts) == 3 and len(outcome.judge_usage) == 3
    assert outcome.verdict is not None and outcome.verdict.rationale.startswith("2 of 3 judges")
    assert outcome.verdict.confidence == pytest.approx(0.65 * 2 / 3)
    assert (project / "src/app.py").read_text() == "VALUE = 2\n"


async def test_vote_tie_goes_to_the_highest_confidence(ws: Workspace, project: Path) -> None:
    coord = await two_ways(ws)
    judges = [
        JudgeScript([verdict("tidy", 0.6)]),
        JudgeScript([verdict("wild", 0.8)]),
        JudgeScript([verdict("nobody"), verdict("still nobody")]),  # no valid vote
    ]
    outcome = await resolve(coord, MergeStrategy(kind="vote"), judges=[j.model for j in judges])
    assert outcome.committed and outcome.winner_label == "wild"
    assert (project / "wild.txt").exists()
    assert len(outcome.judge_usage) == 4  # the third judge was asked twice


async def test_manual_returns_at_once_and_bad_input_is_refused(ws: Workspace) -> None:
    coord = await two_ways(ws)
    outcome = await resolve(coord, MergeStrategy(kind="manual"))
    assert outcome.kind == "manual" and outcome.needs_manual and outcome.verdict is None
    with pytest.raises(ValueError, match="unknown merge strategy"):
        await resolve(coord, MergeStrategy(kind="coin-flip"))  # type: ignore[arg-type]
    await coord.merge_or_select("pick:tidy")
    with pytest.raises(RuntimeError, match="already resolved"):
        await resolve(coord, MergeStrategy(kind="auto"), judges=[TestModel()])


async def test_judge_prompt_is_bounded(ws: Workspace, project: Path, runner) -> None:
    """Goal + diff report + one outcome per branch; never the branches' histories."""
    huge = "".join(f"row {i}\n" for i in range(20_000))
    coord = await fork_with(
        ws,
        {
            "noisy": [
                call("run_command", command="printf 'HISTORY-ONLY-%s' MARKER"),
                call("write_file", path="huge.txt", content=huge),
            ],
            "quiet": [call("write_file", path="src/app.py", content="VALUE = 2\n")],
        },
        runner=runner,
    )
    judge = JudgeScript([verdict("quiet")])
    outcome = await resolve(
        coord, MergeStrategy(kind="auto"), goal="Make VALUE two.", judges=[JudgeAgent(judge.model)]
    )
    prompt = judge.prompts[0]
    assert len(prompt) <= MAX_JUDGE_PROMPT_CHARS
    assert "## Goal\nMake VALUE two." in prompt and "## Diff report" in prompt
    assert "- noisy (id " in prompt and "- quiet (id " in prompt
    # the tool's output (history only) never; its call, summarised, in the process section
    assert "HISTORY-ONLY-MARKER" not in prompt
    assert "run_command(command=\"printf 'HISTORY-ONLY-%s' MARKER\")" in prompt
    assert outcome.committed and outcome.winner_label == "quiet"


def test_prompt_builder_caps_every_section() -> None:
    from branching_core.review.types import BranchOutcome

    outcomes = [
        BranchOutcome(f"id{i}", f"b{i}", "done", final_message="x" * 50_000) for i in range(10)
    ]
    prompt = build_judge_prompt("g" * 100_000, None, outcomes, max_chars=20_000)
    assert len(prompt) <= 20_000
    assert all(f"- b{i} (id id{i})" in prompt for i in range(10))
    assert "characters truncated" in prompt


async def test_branch_outcome_reports_the_run(ws: Workspace) -> None:
    coord = await two_ways(ws)
    o = branch_outcome(coord.get_branch("wild"))
    assert (o.label, o.state, o.requests, o.tool_calls) == ("wild", "done", 3, 2)
    assert o.error_count == 0 and o.retry_count == 0 and o.final_message
    await coord.abort_fork()


def test_vote_panel_from_keys() -> None:
    from branching_core.agent import detect_providers

    assert vote_panel("offline", env={}) == ["offline"] * 3
    env = {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}
    expected = [p.default_model for p in detect_providers(env) if p.installed]
    panel = vote_panel("offline", env=env)
    assert len(panel) == 3
    if expected:
        assert panel == [expected[i % len(expected)] for i in range(3)]
    else:
        assert panel == ["offline"] * 3


async def test_a_judge_that_cannot_answer_falls_back(ws: Workspace, project: Path) -> None:
    """The scripted offline model (what runs when no API key is set) cannot give a verdict."""
    coord = await two_ways(ws)
    outcome = await resolve(coord, MergeStrategy(kind="auto"), judges=["offline"])
    assert outcome.needs_manual and "judge failed" in (outcome.fallback_reason or "")
    assert not coord.is_resolved
    with pytest.raises(ConfigError):
        await resolve(coord, MergeStrategy(kind="auto", judge_model="nosuchprovider:judge-1"))
    assert not coord.is_resolved and (project / "src/app.py").read_text() == "VALUE = 1\n"
    await coord.abort_fork()
