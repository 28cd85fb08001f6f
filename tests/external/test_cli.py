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
    (["--agent", "aider", "--fork-session", "abc"], "cannot resume a session"),
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


def test_manual_pick_reads_the_choice(project: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.StringIO("nope\ncmd-2\n"))
    code = main(["agents", "-w", str(project), "-p", "x", "--pick", "manual", "--test",
                 "python3 check.py", "--agent", f"cmd:{sys.executable} {AGENT} fix",
                 "--agent", f"cmd:{sys.executable} {AGENT} break"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "land which branch?" in err and "no branch 'nope'" in err
    assert "landed cmd-2" in out
    assert (project / "notes.txt").exists()


def test_limits_from_the_command_line_reach_the_agent(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    script = ("import subprocess, sys\n"
              "ps = [subprocess.Popen(['sleep', '5']) for _ in range(3)]\n")
    (project / "fork_many.py").write_text(script)
    code = main(["agents", "-w", str(project), "-p", "x", "--no-test", "--pids-limit", "3",
                 "--agent", f"cmd:{sys.executable} fork_many.py", "--json"])
    data = json.loads(capsys.readouterr().out)
    row = data["branches"][0]
    if row["error"] and "cgroup" in row["error"].lower():
        pytest.skip(f"cgroup limits unavailable: {row['error']}")
    assert code == 1 and row["status"] == "failed" and row["exit_code"] == 1, row


def test_ctrl_c_kills_every_agent_and_lands_nothing(project: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time
    import uuid

    from branching_core.workspace import Workspace
    from tests.external.conftest import leftover_processes

    token = f"forkdeck-ctrlc-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "branching_core.cli", "agents", "-w", str(project), "-p", "x",
         "--no-test", "--agent", f"cmd:{sys.executable} {AGENT} hang {token}", "-n", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(leftover_processes(token)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)  # two agents and their two detached grandchildren
        assert len(leftover_processes(token)) >= 4
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    deadline = time.monotonic() + 5
    while leftover_processes(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftover_processes(token) == []
    assert not (project / "partial.txt").exists()
    assert Workspace(project).list_branches() == []
