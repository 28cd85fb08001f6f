"""aider (``aider-chat`` from PyPI) raced in a branch against the scripted OpenAI-compatible
server (``POST /v1/chat/completions``, SSE): the reply is aider's "whole" edit format.

Not installed by ``.ci/run`` (a 687 MB virtualenv, ~84 s to build on top of the two npm
agent CLIs): this test runs where ``FORKDECK_AIDER`` (or
``/opt/forkdeck-ci/aider/bin/aider``) names an install, and skips saying so elsewhere.
"""

from __future__ import annotations

import json
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

DEFAULT_INSTALL = "/opt/forkdeck-ci/aider/bin/aider"
FIXED = "def add(a, b):\n    return a + b\n"


def _aider() -> str:
    path = os.environ.get("FORKDECK_AIDER") or DEFAULT_INSTALL
    if not os.access(path, os.X_OK):
        pytest.skip(f"aider cli not installed ({path}); .ci/run does not install it (687 MB)")
    return path


def _answer(body: dict[str, Any]) -> Reply:
    return Reply.text("calc.py\n```python\n", FIXED, "```\n")


def test_aider_edits_its_branch_and_the_tests_pick_it(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _aider()
    home = Path("/var/tmp") / f"forkdeck-aider-home-{uuid.uuid4().hex[:8]}"
    caches = home / ".aider" / "caches"
    caches.mkdir(parents=True)
    # aider fetches a price list at start unless this holds non-empty JSON.
    (caches / "model_prices_and_context_window.json").write_text(json.dumps(
        {"scripted-model": {"max_tokens": 4096, "litellm_provider": "openai",
                            "mode": "chat"}}))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("AIDER_MODEL", "openai/scripted-model")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    aider = resolve_profile("aider")
    aider = replace(aider, command=(exe, *aider.command[1:], "--no-gitignore",
                                    "--no-show-model-warnings", "calc.py"))
    try:
        with scripted_server() as server:
            server.handler = _answer
            monkeypatch.setenv("OPENAI_API_BASE", server.url)
            race = AgentRace(Workspace(project), [aider, resolve_profile(agent_cmd("break"))],
                             "make add() add", test_command=f"{sys.executable} check.py",
                             timeout=120)
            outcome = race.run()
        rows = {b.label: b for b in outcome.branches}
        assert "aider" in race.runs, rows["aider"].error
        tail = "\n".join(race.runs["aider"].lines)
        assert rows["aider"].exit_code == 0, tail
        assert rows["aider"].changed == ["calc.py"], (rows["aider"].changed, tail)
        assert outcome.winner == "aider", outcome.to_json()
        assert (project / "calc.py").read_text() == FIXED
        assert not (project / "notes.txt").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)
