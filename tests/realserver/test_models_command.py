"""``forkdeck models`` reports: no key, a key, a reachable and an unreachable server."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from branching_core.cli import main
from tests.realserver.helpers import write_config
from tests.support.openai_server import ScriptedServer


def _closed_port_url() -> str:
    """A loopback URL nobody listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def run_models(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["models", "-w", str(tmp_path), "--json", *args])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_no_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_models(tmp_path, capsys)
    assert code == 0 and data["keys_set"] == [] and "offline" in data["resolved"]
    code, data = run_models(tmp_path, capsys, "--model", "openai:gpt-6-luna")
    assert code == 1 and "OPENAI_API_KEY" in data["resolve_error"]


def test_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    code, data = run_models(tmp_path, capsys, "--model", "openai:gpt-6-luna")
    assert code == 0 and data["keys_set"] == ["OPENAI_API_KEY"]
    assert data["resolved"] == "openai:gpt-6-luna" and data["resolve_error"] is None


def test_reachable_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: ScriptedServer
) -> None:
    write_config(tmp_path, f'[model]\ndefault = "scripted-model"\nbase_url = "{server.url}"\n')
    code, data = run_models(tmp_path, capsys)
    assert code == 0, data
    (check,) = data["servers"]
    assert check["reachable"] and check["models"] == ["scripted-model"]
    assert check["verdict"].startswith("OK")
    main(["models", "-w", str(tmp_path)])
    text = capsys.readouterr().out
    assert "verdict: OK" in text and server.url in text


def test_unreachable_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _closed_port_url()
    code, data = run_models(tmp_path, capsys, "--model", "mymodel", "--base-url", url)
    assert code == 1
    (check,) = data["servers"]
    assert not check["reachable"] and "UNREACHABLE" in check["verdict"] and url in check["verdict"]
    main(["models", "-w", str(tmp_path), "--base-url", url])
    assert "NOT READY" in capsys.readouterr().out


def test_server_without_the_wanted_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: ScriptedServer
) -> None:
    _, data = run_models(tmp_path, capsys, "--model", "nope", "--base-url", server.url)
    assert "WARNING: it does not list 'nope'" in data["servers"][0]["verdict"]


def test_fork_models_are_checked_with_the_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: ScriptedServer
) -> None:
    write_config(
        tmp_path,
        f'[model]\ndefault = "scripted-model"\nbase_url = "{server.url}"\n'
        '[fork.models]\n1 = "openai:branch-a"\n2 = "anthropic:claude-haiku-5-5"\n',
    )
    code, data = run_models(tmp_path, capsys)
    assert code == 1
    assert data["branch_resolved"]["1"] == {"model": f"branch-a @ {server.url}", "problem": None}
    assert "ANTHROPIC_API_KEY" in data["branch_resolved"]["2"]["problem"]
