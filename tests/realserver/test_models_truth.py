"""Issue 24.10: ``forkdeck models`` asks the server and says what is really there, and a
broken config.toml is never hidden (``models`` and ``status``). Real scripted
OpenAI-compatible server on 127.0.0.1; the real CLI, in process and as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from branching_core.cli import main
from tests.realserver.helpers import write_config
from tests.realserver.test_models_command import _closed_port_url, run_models
from tests.support.openai_server import ScriptedServer


def test_only_openai_env_vars_name_the_servers_real_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedServer(models=("qwen2.5-coder-7b",), require_key="sk-local") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
        code, data = run_models(tmp_path, capsys)
        assert code == 0, data
        assert data["resolved"] == f"qwen2.5-coder-7b @ {server.url}"  # asked, not made up
        (check,) = data["servers"]
        assert check["role"] == "OPENAI_BASE_URL" and check["models"] == ["qwen2.5-coder-7b"]
        assert data["hosted"] is None
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
        code, data = run_models(tmp_path, capsys)
        assert code == 1
        (check,) = data["servers"]
        assert "HTTP 401" in check["verdict"] and "the key sent was refused" in check["verdict"]


def test_connection_refused_and_no_such_model_are_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _closed_port_url()
    code, data = run_models(tmp_path, capsys, "--model", "m", "--base-url", url)
    assert code == 1 and "connection refused" in data["servers"][0]["verdict"]
    with ScriptedServer(models=("alpha", "beta")) as server:
        code, data = run_models(tmp_path, capsys, "--model", "gamma", "--base-url", server.url)
        assert code == 1
        verdict = data["servers"][0]["verdict"]
        assert verdict.startswith("NO SUCH MODEL: it does not list 'gamma'") and "alpha" in verdict
        main(["models", "-w", str(tmp_path), "--model", "beta", "--base-url", server.url])
        text = capsys.readouterr().out
        assert f"model in use: beta @ {server.url}" in text and "verdict: OK" in text


def test_a_base_url_without_a_scheme_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = run_models(tmp_path, capsys, "--model", "m", "--base-url", "127.0.0.1:8000/v1")
    assert code == 1
    assert data["resolve_error"] == (
        "base URL '127.0.0.1:8000/v1' has no scheme: write http://127.0.0.1:8000/v1"
    )
    assert "has no scheme" in data["servers"][0]["verdict"]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ('[fork]\nbranches = -3\n', "fork.branches"),
        ('[model\ndefault = "x"\n', "config.toml"),
    ],
)
def test_a_broken_config_comes_first_and_is_not_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, expected: str
) -> None:
    write_config(tmp_path, config)
    code, data = run_models(tmp_path, capsys)
    assert code == 1 and not data["ok"]
    assert data["config_problems"] and expected in data["config_problems"][0]
    main(["models", "-w", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("CONFIG PROBLEM: ") and expected in lines[0]
    assert lines[-1].startswith("verdict: NOT READY")


def test_status_reports_a_broken_config(tmp_path: Path) -> None:
    write_config(tmp_path, "[fork]\nbranches = -3\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, "-m", "forkdeck.entry", "status", "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("CONFIG PROBLEM: ") and "fork.branches" in first
    done = subprocess.run(
        [sys.executable, "-m", "forkdeck.entry", "status", "-w", str(tmp_path), "--json"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )
    problems = json.loads(done.stdout)["config_problems"]
    assert len(problems) == 1 and "fork.branches" in problems[0]
