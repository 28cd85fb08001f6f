"""Racing agent CLIs in branches: the scripted agent (``scripted_agent.py``) in real branch
sandboxes on real pseudo-terminals; the pick, landing, steering, killing and budgets."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

from branching_core.external import AgentRace, resolve_profile
from branching_core.workspace import Workspace
from tests.external.conftest import agent_cmd, leftover_processes


def _race(project: Path, specs: list[str], **kwargs: object) -> tuple[AgentRace, Workspace]:
    ws = Workspace(project)
    race = AgentRace(ws, [resolve_profile(s) for s in specs], "make add() add",
                     **kwargs)  # type: ignore[arg-type]
    return race, ws


def test_tests_pick_the_passing_branch_and_only_its_files_land(project: Path) -> None:
    race, ws = _race(project, [agent_cmd("break"), agent_cmd("fix"), agent_cmd("fail")],
                     test_command="python3 check.py")
    outcome = race.run()
    by_label = {b.label: b for b in outcome.branches}
    assert outcome.winner == "cmd-2", outcome.to_json()
    assert by_label["cmd-2"].status == "landed"
    assert by_label["cmd-2"].tests is not None and by_label["cmd-2"].tests["ok"]
    assert by_label["cmd-1"].tests is not None and not by_label["cmd-1"].tests["ok"]
    assert by_label["cmd-1"].changed == ["calc.py", "notes.txt"]
    assert by_label["cmd-3"].status == "failed" and by_label["cmd-3"].exit_code == 3
    assert by_label["cmd-3"].tests is None  # an agent that failed is not tested
    # Exactly the winner's change is in the workspace; the losers' files vanished.
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert not (project / "notes.txt").exists()
    assert sorted(p.name for p in project.iterdir()) == [".git", "calc.py", "check.py"]
    assert ws.open_branches() == [] and ws.list_branches() == []
    # The agents ran on a terminal at the workspace's own path.
    assert any(f"in {project} (terminal: True)" in line for line in race.runs["cmd-2"].lines)


def test_smallest_passing_diff_wins(project: Path) -> None:
    race, _ws = _race(project, [agent_cmd("big"), agent_cmd("fix")],
                      test_command="python3 check.py")
    outcome = race.run()
    assert outcome.winner == "cmd-2"
    assert not (project / "README.extra").exists()


def test_a_steer_reaches_the_agents_terminal(project: Path) -> None:
    steered = threading.Event()

    def on_line(label: str, line: str) -> None:
        if "waiting for a steer" in line and not steered.is_set():
            steered.set()
            assert race.steer(label, "use integers please")

    race, _ws = _race(project, [agent_cmd("steer", "{prompt}")], pick="first", on_line=on_line,
                      timeout=60)
    outcome = race.run()
    assert steered.is_set()
    assert outcome.winner == "cmd", outcome.to_json()
    assert (project / "steered.txt").read_text().strip() == "use integers please"


def test_a_profile_that_reads_no_input_says_it_cannot_be_steered(project: Path) -> None:
    race, _ws = _race(project, ["claude"])
    profile = race.profiles[0]
    assert profile.steer is False  # claude -p reads nothing while it works


def test_a_killed_agent_leaves_nothing(project: Path) -> None:
    token = f"forkdeck-hang-{uuid.uuid4().hex}"
    race, ws = _race(project, [agent_cmd("hang", token)], timeout=1.5,
                     test_command="python3 check.py")
    outcome = race.run()
    branch = outcome.branches[0]
    assert branch.status == "timed-out" and "wall-clock" in (branch.error or "")
    assert outcome.winner is None
    assert not (project / "partial.txt").exists()
    assert ws.list_branches() == []
    deadline = time.monotonic() + 5
    while leftover_processes(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftover_processes(token) == []


def test_first_lands_the_first_to_exit_zero_and_kills_the_rest(project: Path) -> None:
    token = f"forkdeck-first-{uuid.uuid4().hex}"
    race, _ws = _race(project, [agent_cmd("hang", token), agent_cmd("fix")], pick="first")
    outcome = race.run()
    by_label = {b.label: b for b in outcome.branches}
    assert outcome.winner == "cmd-2"
    assert by_label["cmd-1"].status == "killed"
    assert (project / "calc.py").read_text().endswith("a + b\n")
    assert not (project / "partial.txt").exists()
    deadline = time.monotonic() + 5
    while leftover_processes(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftover_processes(token) == []


def test_a_reported_cost_over_budget_stops_the_branch(project: Path) -> None:
    race, _ws = _race(project, [agent_cmd("cost", "5.0", "30"), agent_cmd("cost", "0.01")],
                      cost_budget_usd=1.0, test_command="python3 check.py")
    outcome = race.run()
    by_label = {b.label: b for b in outcome.branches}
    assert by_label["cmd-1"].status == "over-budget" and by_label["cmd-1"].cost_usd == 5.0
    assert by_label["cmd-2"].cost_usd == 0.01
    assert outcome.winner == "cmd-2"


def test_an_agent_that_is_not_installed_fails_its_branch_only(project: Path) -> None:
    race, _ws = _race(project, ["cmd:no-such-agent-cli --go {prompt}", agent_cmd("fix")],
                      test_command="python3 check.py")
    outcome = race.run()
    by_label = {b.label: b for b in outcome.branches}
    assert by_label["cmd-1"].status == "failed"
    assert "not found on PATH" in (by_label["cmd-1"].error or "")
    assert outcome.winner == "cmd-2"


def test_manual_pick_lands_the_chosen_branch(project: Path) -> None:
    seen: list[list[str]] = []

    def choose(rows: list) -> str:
        seen.append([r.label for r in rows])
        assert {r.label: r.tests for r in rows} == {"cmd-1": "failed", "cmd-2": "passed"}
        return "cmd-1"  # the user may land a failing branch on purpose

    race, _ws = _race(project, [agent_cmd("break"), agent_cmd("fix")], pick="manual",
                      chooser=choose, test_command="python3 check.py")
    outcome = race.run()
    assert seen == [["cmd-1", "cmd-2"]]
    assert outcome.winner == "cmd-1"
    assert (project / "notes.txt").exists()


def test_judge_pick_asks_the_judge_with_the_diffs(project: Path) -> None:
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    prompts: list[str] = []

    def judge(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1]))
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {
            "winner": "cmd-2", "confidence": 0.9, "rationale": "adds, as asked"})])

    race, _ws = _race(project, [agent_cmd("break"), agent_cmd("big")], pick="judge",
                      judge_model=FunctionModel(judge), test_command="python3 check.py")
    outcome = race.run()
    assert outcome.winner == "cmd-2", outcome.note
    assert "adds, as asked" in outcome.note
    assert "README.extra" in prompts[0] and "notes.txt" in prompts[0]
    assert (project / "README.extra").exists() and not (project / "notes.txt").exists()
