"""The judge log, agreement rate, threshold tuning and per-domain judge instructions.

Real coordinators and real branch agents (FunctionModel scripts); the judge is a real
pydantic-ai Agent on a FunctionModel that records the instructions it was given.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from branching_core.config import Settings, load_settings
from branching_core.errors import ConfigError
from branching_core.fork import MergeStrategy
from branching_core.review import resolve
from branching_core.review.domain import judge_domain
from branching_core.review.judge import JUDGE_SYSTEM_PROMPT, WRITING_JUDGE_SYSTEM_PROMPT
from branching_core.review.judge_log import (
    judge_agreement,
    judge_log_path,
    read_judge_log,
    record_judge_decision,
    tune_confidence_threshold,
)
from branching_core.workspace import Workspace

from .forks import call, fork_with, project, runner, ws

__all__ = ["project", "runner", "ws"]


class InstructedJudge:
    """A judge model that answers ``winner`` and keeps the instructions of every request."""

    def __init__(self, winner: str, confidence: float = 0.9) -> None:
        self.answer = {"winner": winner, "confidence": confidence, "rationale": "r"}
        self.instructions: list[str | None] = []
        self.model = FunctionModel(self._respond, model_name="judge")

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        self.instructions.append(last.instructions if isinstance(last, ModelRequest) else None)
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, json.dumps(self.answer))]
        )


async def two_ways(ws: Workspace, *, prose: bool = False):
    ext = "md" if prose else "py"
    return await fork_with(
        ws,
        {
            "tidy": [call("write_file", path=f"doc/a.{ext}", content="two\n")],
            "wild": [call("write_file", path=f"doc/a.{ext}", content="ninety-nine\n")],
        },
    )


async def test_auto_merge_is_logged_and_code_gets_code_instructions(
    ws: Workspace, project: Path
) -> None:
    coord = await two_ways(ws)
    judge = InstructedJudge("tidy")
    outcome = await resolve(coord, MergeStrategy(kind="auto"), judges=[judge.model], goal="fix x")
    assert outcome.committed and outcome.domain == "code"
    assert judge.instructions == [JUDGE_SYSTEM_PROMPT]
    (entry,) = read_judge_log(project)
    assert entry["user_action"] == "auto" and entry["verdict"] == "tidy"
    assert entry["chosen"] == "tidy" and entry["goal"] == "fix x" and entry["domain"] == "code"
    assert entry["judge_confidence"] == 0.9 and entry["confidence"] == outcome.confidence
    assert entry["report"].startswith("1 path(s): 1 split")
    # auto merges are kept, but nobody agreed or disagreed
    agreement = judge_agreement(project)
    assert agreement.auto == 1 and agreement.rate is None
    assert agreement.line() == "judge agreement: no decisions yet"
    # the state dir is kept out of git status
    assert (project / ".pydantic-deep" / ".gitignore").is_file()


async def test_prose_branches_get_the_writing_judge(ws: Workspace, project: Path) -> None:
    coord = await two_ways(ws, prose=True)
    judge = InstructedJudge("wild", 0.4)
    outcome = await resolve(
        coord, MergeStrategy(kind="auto_with_fallback"), judges=[judge.model], goal="fix it"
    )
    assert outcome.domain == "writing" and not outcome.committed
    assert judge.instructions == [WRITING_JUDGE_SYSTEM_PROMPT]
    # the UI shows the pick; the user overrides it and merges "tidy"
    await coord.merge_or_select("pick:tidy")
    entry = record_judge_decision(project, outcome, user_action="overrode", chosen="tidy")
    assert entry["verdict"] == "wild" and entry["chosen"] == "tidy"
    assert read_judge_log(project) == [entry]
    assert judge_agreement(project).rate == 0.0


def test_domain_from_goal_when_no_files() -> None:
    assert judge_domain("Write a short essay comparing the two sources", None) == "writing"
    assert judge_domain("fix the parser bug and add a test", None) == "code"
    assert judge_domain(None, None) == "code"


def test_agreement_rate_and_accepted_other_label(tmp_path: Path) -> None:
    for action, chosen in [
        ("accepted", None),
        ("accepted", None),
        ("accepted", None),
        ("overrode", "b"),
        ("cancelled", None),
    ]:
        record_judge_decision(
            tmp_path, user_action=action, chosen=chosen, verdict=_Verdict("a"), confidence=0.9
        )
    # "accepted" with another label than the judge's is an override, whatever the caller said
    record_judge_decision(tmp_path, user_action="accepted", chosen="c", verdict=_Verdict("a"))
    agreement = judge_agreement(tmp_path)
    assert (agreement.accepted, agreement.overridden, agreement.cancelled) == (3, 2, 1)
    assert agreement.rate == pytest.approx(0.6)
    assert agreement.line() == "judge agreement: 60% (3 of 5 decisions; 1 cancelled)"
    # a file path works too
    assert judge_agreement(judge_log_path(tmp_path)).decided == 5
    # a pick made after a judge that named no branch is no disagreement with it
    record_judge_decision(tmp_path, user_action="overrode", chosen="b")
    assert judge_agreement(tmp_path).decided == 5 and len(read_judge_log(tmp_path)) == 7


class _Verdict:
    def __init__(self, winner: str, confidence: float = 0.8) -> None:
        self.winner, self.confidence = winner, confidence


def test_bad_input_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown user_action"):
        record_judge_decision(tmp_path, user_action="liked", verdict=_Verdict("a"))
    with pytest.raises(ValueError, match="needs chosen"):
        record_judge_decision(tmp_path, user_action="overrode", verdict=_Verdict("a"))
    assert not (tmp_path / ".pydantic-deep").exists()


def test_state_dir_leading_outside_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".pydantic-deep").symlink_to(outside)
    with pytest.raises(ConfigError, match="outside the workspace"):
        record_judge_decision(root, user_action="accepted", verdict=_Verdict("a"))
    assert list(outside.iterdir()) == []


def test_torn_line_is_skipped_and_concurrent_appends_stay_whole(tmp_path: Path) -> None:
    log = judge_log_path(tmp_path)
    log.parent.mkdir()
    log.write_text('{"user_action": "accepted", "verdict": "a"}\n{"user_action": "acc')

    def writer(n: int) -> None:
        for i in range(50):
            record_judge_decision(
                tmp_path, user_action="accepted", verdict=_Verdict("a"), goal=f"{n}-{i}" * 40
            )

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # the torn line costs only itself: the next append starts on a line of its own
    entries = read_judge_log(tmp_path)
    assert len(entries) == 201
    lines = log.read_bytes().splitlines()
    assert len(lines) == 202 and all(json.loads(line) for line in lines[2:])


def _log_points(root: Path, points: list[tuple[float, str]]) -> None:
    for conf, action in points:
        record_judge_decision(
            root,
            user_action=action,
            chosen="b" if action == "overrode" else None,
            verdict=_Verdict("a"),
            confidence=conf,
        )


def test_threshold_tuning(tmp_path: Path) -> None:
    # too little history: the default stays
    _log_points(tmp_path, [(0.9, "accepted")] * 5)
    assert tune_confidence_threshold(tmp_path, 0.8) == 0.8
    # the user overrode the picks at 0.5 and 0.6, accepted everything from 0.65 up
    _log_points(tmp_path, [(0.5, "overrode"), (0.6, "overrode"), (0.65, "accepted")])
    _log_points(tmp_path, [(0.7, "accepted"), (0.75, "accepted"), (0.8, "accepted")] * 2)
    # from 0.6 up: 12 of 13 agreed (92% >= 90%); from 0.5 up: 12 of 14 (86%)
    assert tune_confidence_threshold(tmp_path, 0.8) == 0.6
    # asking for full agreement: from 0.65 up all 12 agreed
    assert tune_confidence_threshold(tmp_path, 0.8, target=1.0) == 0.65
    # a user who overrides even confident picks: nothing reaches the target, default stays
    other = tmp_path / "other"
    other.mkdir()
    _log_points(other, [(0.95, "overrode"), (0.9, "accepted")] * 10)
    assert tune_confidence_threshold(other, 0.8) == 0.8


async def test_auto_tune_setting_changes_the_threshold(ws: Workspace, project: Path) -> None:
    (project / ".pydantic-deep").mkdir()
    (project / ".pydantic-deep" / "config.toml").write_text(
        "[review]\nauto_tune_threshold = true\n"
    )
    settings = load_settings(project).settings
    assert settings.auto_tune_threshold is True and Settings().auto_tune_threshold is False
    _log_points(project, [(0.6, "accepted")] * 12)
    coord = await two_ways(ws)
    judge = InstructedJudge("tidy")
    tuned = await resolve(
        coord, MergeStrategy(kind="auto_with_fallback"), judges=[judge.model], settings=settings
    )
    assert tuned.threshold == 0.6
    await coord.abort_fork()
    coord = await two_ways(ws)
    plain = await resolve(
        coord, MergeStrategy(kind="auto_with_fallback"), judges=[judge.model], settings=Settings()
    )
    assert plain.threshold == 0.8
    await coord.abort_fork()


def test_log_is_valid_jsonl_with_one_write_per_line(tmp_path: Path) -> None:
    entry: dict[str, Any] = record_judge_decision(
        tmp_path, user_action="cancelled", verdict=_Verdict("a"), goal="g"
    )
    data = judge_log_path(tmp_path).read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert json.loads(data) == entry
    assert oct(os.stat(judge_log_path(tmp_path)).st_mode & 0o777) == "0o644"


def test_forkdeck_status_shows_the_agreement(tmp_path: Path) -> None:
    import subprocess
    import sys

    _log_points(tmp_path, [(0.9, "accepted")] * 3 + [(0.7, "overrode")])
    proc = subprocess.run(
        [sys.executable, "-m", "branching_core.cli", "status", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "judge agreement: 75% (3 of 4 decisions)" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "branching_core.cli", "status", "-w", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    data = json.loads(proc.stdout)
    assert data["judge_agreement"]["rate"] == 0.75 and data["judge_agreement"]["overridden"] == 1
