"""A second real agent CLI in branches: the Codex CLI (``@openai/codex`` from npm), driven
offline by the scripted server's Responses API (``POST /v1/responses``, SSE).

Codex reads its provider from ``$CODEX_HOME/config.toml`` (here ``~/.codex``, exposed
read-write by the built-in ``codex`` profile; the rest of the home is masked): a custom
provider on 127.0.0.1 whose key comes from an environment variable (no login), every
outside lookup off. The server answers with an ``exec_command`` call holding an
``apply_patch`` here-doc (Codex's own edit format), then "Done.". Next to it a scripted
agent breaks the code; the tests pick Codex's branch and only its change lands.

``.ci/run`` installs it into ``/opt/forkdeck-ci/codex``; ``FORKDECK_CODEX`` names another
executable; FORKDECK_REQUIRE's ``codex`` makes a missing install fail CI.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from branching_core.external import AgentRace, resolve_profile
from branching_core.workspace import Workspace
from tests.external.conftest import agent_cmd
from tests.support.openai_server import Reply, scripted_server

DEFAULT_INSTALL = "/opt/forkdeck-ci/codex/node_modules/.bin/codex"
PATCH = ("*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n"
         "-    return a - b\n+    return a + b\n*** End Patch\n")
CONFIG = """model = "scripted-model"
model_provider = "scripted"
check_for_update_on_startup = false
[model_providers.scripted]
name = "scripted"
base_url = "{url}"
env_key = "CODEX_SCRIPTED_KEY"
wire_api = "responses"
[analytics]
enabled = false
[otel]
exporter = "none"
metrics_exporter = "none"
[features]
plugins = false
remote_plugin = false
in_app_updates = false
"""


def _codex() -> str:
    path = os.environ.get("FORKDECK_CODEX") or DEFAULT_INSTALL
    if not os.access(path, os.X_OK):
        found = shutil.which("codex")
        if found is None:
            pytest.skip(f"codex cli not installed ({path}; .ci/run installs it)")
        path = found
    return path


def _answer(body: dict[str, Any]) -> Reply:
    items = body.get("input") or []
    if any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items):
        return Reply.text("Done.")
    return Reply.tool("exec_command", cmd=f"apply_patch <<'EOF'\n{PATCH}EOF\n")


def test_codex_edits_its_branch_and_the_tests_pick_it(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _codex()
    home = Path("/var/tmp") / f"forkdeck-codex-home-{uuid.uuid4().hex[:8]}"
    (home / ".codex").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("CODEX_SCRIPTED_KEY", "sk-test-not-a-key")
    codex = resolve_profile("codex")
    codex = replace(codex, command=(exe, *codex.command[1:]))
    try:
        with scripted_server() as server:
            server.handler = _answer
            (home / ".codex" / "config.toml").write_text(CONFIG.format(url=server.url))
            race = AgentRace(Workspace(project), [codex, resolve_profile(agent_cmd("break"))],
                             "make add() add", test_command=f"{sys.executable} check.py",
                             timeout=90)
            outcome = race.run()
        rows = {b.label: b for b in outcome.branches}
        assert "codex" in race.runs, rows["codex"].error
        tail = "\n".join(race.runs["codex"].lines)
        assert rows["codex"].exit_code == 0, tail
        assert rows["codex"].changed == ["calc.py"], tail
        assert rows["codex"].tests is not None and rows["codex"].tests["ok"]
        assert outcome.winner == "codex", outcome.to_json()
        assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
        assert not (project / "notes.txt").exists()
        assert len(server.requests) >= 2
        assert list((home / ".codex").rglob("*.jsonl")), tail  # its session, saved
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_codex_fork_session_carries_the_conversation_into_each_branch(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    exe = _codex()
    home = Path("/var/tmp") / f"forkdeck-codex-home-{uuid.uuid4().hex[:8]}"
    (home / ".codex").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("CODEX_SCRIPTED_KEY", "sk-test-not-a-key")
    base = resolve_profile("codex")
    codex = replace(base, command=(exe, *base.command[1:]),
                    resume=(exe, *(base.resume or ())[1:]))
    try:
        with scripted_server() as server:
            server.handler = lambda body: Reply.text("Noted: the secret word is PLUM.")
            (home / ".codex" / "config.toml").write_text(CONFIG.format(url=server.url))
            ws = Workspace(project)
            first = AgentRace(ws, [codex], "remember the word PLUM", pick="manual",
                              chooser=lambda rows: None, timeout=90).run()
            session = first.branches[0].session_id
            assert session, first.branches[0].output_tail
            seen = len(server.requests)
            server.handler = _answer
            outcome = AgentRace(ws, [codex], "now fix add()", n=2, session=session,
                                test_command=f"{sys.executable} check.py", timeout=90).run()
        rows = {b.label: b for b in outcome.branches}
        assert outcome.winner in ("codex-1", "codex-2"), outcome.to_json()
        forked = server.requests[seen:]
        assert forked and all("PLUM" in json.dumps(r.get("input")) for r in forked)
        new_ids = {rows["codex-1"].session_id, rows["codex-2"].session_id}
        assert session not in new_ids and len(new_ids) == 2
        assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    finally:
        shutil.rmtree(home, ignore_errors=True)
