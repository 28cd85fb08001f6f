"""``forkdeck agents``: profiles from config.toml, --json, usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from branching_core.cli import main
from tests.external.conftest import AGENT


def _config(project: Path, text: str) -> None:
    (project / ".pydantic-deep").mkdir(exist_ok=True)
    (project / ".pydantic-deep" / "config.toml").write_text(text)


def test_json_outcome_per_branch_with_a_configured_profile(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    _config(project, f'[agents.fixer]\ncommand = "{sys.executable} {AGENT} fix"\n'
                     f'[agents.breaker]\ncommand = "{sys.executable} {AGENT} break"\n'
                     '[review]\ntest_command = "python3 check.py"\n')
    code = main(["agents", "-w", str(project), "-p", "fix add", "--agent", "fixer",
                 "--agent", "breaker", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0, data
    assert data["winner"] == "fixer" and data["test_command"] == "python3 check.py"
    rows = {b["label"]: b for b in data["branches"]}
    assert rows["fixer"]["status"] == "landed" and rows["fixer"]["tests"]["ok"] is True
    assert rows["breaker"]["tests"]["ok"] is False
    assert rows["breaker"]["changed"] == ["calc.py", "notes.txt"]
    assert set(rows["fixer"]) >= {"exit_code", "duration_s", "cost_usd", "changed"}
    assert (project / "calc.py").read_text().endswith("a + b\n")
    assert not (project / "notes.txt").exists()


def test_n_copies_of_one_agent(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    code = main(["agents", "-w", str(project), "-p", "x", "-n", "3", "--test",
                 "python3 check.py", "--agent", f"cmd:{sys.executable} {AGENT} fix", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [b["label"] for b in data["branches"]] == ["cmd-1", "cmd-2", "cmd-3"]
    assert sum(b["landed"] for b in data["branches"]) == 1


@pytest.mark.parametrize("argv, message", [
    (["--agent", "nope"], "unknown agent 'nope'"),
    ([], "name at least one --agent"),
    (["--agent", "codex", "--fork-session", "abc"], "cannot resume a session"),
    (["--agent", "cmd:"], "empty command"),
])
def test_bad_input_is_one_line_and_changes_nothing(
        project: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
        message: str) -> None:
    before = {p.name: p.read_bytes() for p in project.iterdir() if p.is_file()}
    code = main(["agents", "-w", str(project), "-p", "x", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in project.iterdir() if p.is_file()} == before
