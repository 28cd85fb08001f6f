"""A real third-party agent CLI in branches: Claude Code (``@anthropic-ai/claude-code``
from npm), driven offline by the project's scripted Anthropic-compatible server on
127.0.0.1 (``tests/support/openai_server.py``: ``POST /v1/messages``, SSE).

The server answers Claude Code's first request with a ``Write`` tool call (Claude Code's
own edit tool, absolute path under the "Primary working directory" it states) and the
next with "Done.". Claude Code runs with the built-in ``claude`` profile (its home
masked, ``~/.claude`` exposed read-write), next to a scripted agent that breaks the
code; the tests pick Claude Code's branch and only its change lands.

Where it comes from: ``.ci/run`` installs it into ``/opt/forkdeck-ci/claude-code``;
``FORKDECK_CLAUDE_CODE`` names another ``claude`` executable. FORKDECK_REQUIRE's
``claude-code`` makes a missing install fail CI instead of skipping.
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

DEFAULT_INSTALL = "/opt/forkdeck-ci/claude-code/node_modules/.bin/claude"
FIXED = "def add(a, b):\n    return a + b\n"


def _claude() -> str:
    path = os.environ.get("FORKDECK_CLAUDE_CODE") or DEFAULT_INSTALL
    if not os.access(path, os.X_OK):
        found = shutil.which("claude")
        if found is None:
            pytest.skip(f"claude code cli not installed ({path}; .ci/run installs it)")
        path = found
    return path


@pytest.fixture
def claude_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh HOME outside /tmp (the sandbox's /tmp is private) and the executable."""
    exe = _claude()
    home = Path("/var/tmp") / f"forkdeck-cc-home-{uuid.uuid4().hex[:8]}"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    try:
        yield home, exe
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _handler(project: Path) -> Any:
    def answer(body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        content = messages[-1].get("content") if messages else None
        if isinstance(content, list) and any(c.get("type") == "tool_result" for c in content):
            return Reply.text("Done.")
        if not body.get("tools"):
            return Reply.text("ok")
        return Reply.tool("Write", file_path=str(project / "calc.py"), content=FIXED)

    return answer


def test_claude_code_edits_its_branch_and_the_tests_pick_it(
        project: Path, claude_env: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    home, exe = claude_env
    claude = resolve_profile("claude")
    claude = replace(claude, command=(exe, *claude.command[1:]))
    with scripted_server() as server:
        server.handler = _handler(project)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url.removesuffix("/v1"))
        ws = Workspace(project)
        race = AgentRace(ws, [claude, resolve_profile(agent_cmd("break"))],
                         "make add() add", test_command=f"{sys.executable} check.py", timeout=60)
        outcome = race.run()
    rows = {b.label: b for b in outcome.branches}
    assert "claude" in race.runs, outcome.branches[0].error
    tail = "\n".join(race.runs["claude"].lines)
    assert rows["claude"].exit_code == 0, tail
    assert rows["claude"].changed == ["calc.py"], tail
    assert rows["claude"].tests is not None and rows["claude"].tests["ok"]
    assert rows["claude"].cost_usd is not None  # from its stream-json result line
    assert outcome.winner == "claude", outcome.to_json()
    assert (project / "calc.py").read_text() == FIXED
    assert not (project / "notes.txt").exists()  # the other agent's work vanished
    assert len([r for r in server.requests if r.get("tools")]) >= 2
    # Claude Code saw the branch at the workspace's own path (its working directory).
    assert str(project) in json.dumps(next(r for r in server.requests if r.get("tools")))
    # It saved its session in the exposed ~/.claude (what --fork-session resumes).
    assert list((home / ".claude").rglob("*.jsonl")), tail


def test_fork_session_gives_every_branch_the_conversation_so_far(
        project: Path, claude_env: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    _home, exe = claude_env
    claude = resolve_profile("claude")
    claude = replace(claude, command=(exe, *claude.command[1:]),
                     resume=(exe, *(claude.resume or ())[1:]))
    with scripted_server() as server:
        server.handler = lambda body: Reply.text("Noted: the secret word is PLUM.")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url.removesuffix("/v1"))
        ws = Workspace(project)
        first = AgentRace(ws, [claude], "remember the word PLUM", pick="manual",
                          chooser=lambda rows: None, timeout=60).run()
        session = first.branches[0].session_id
        assert session, first.branches[0].output_tail
        seen = len(server.requests)
        server.handler = _handler(project)
        race = AgentRace(ws, [claude], "now fix add()", n=2, session=session,
                         test_command=f"{sys.executable} check.py", timeout=60)
        outcome = race.run()
    rows = {b.label: b for b in outcome.branches}
    assert outcome.winner in ("claude-1", "claude-2"), outcome.to_json()
    forked = [r for r in server.requests[seen:] if r.get("tools")]
    assert forked and all("PLUM" in json.dumps(r["messages"]) for r in forked)
    new_ids = {rows["claude-1"].session_id, rows["claude-2"].session_id}
    assert session not in new_ids and len(new_ids) == 2  # each branch a session of its own
    assert (project / "calc.py").read_text() == FIXED


def test_fork_rows_fork_a_live_claude_session(
        project: Path, claude_env: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``/fork`` with rows ``agent:claude@<session>`` does in the TUI: every branch
    continues the saved conversation in a session of its own, and merges like any branch."""
    import asyncio
    import shlex

    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from branching_core import ForkCoordinator
    from branching_core.config.schema import AgentProfileSettings
    from branching_core.external.fork_runner import ExternalAgentRunner
    from branching_core.fork.types import BranchSpec

    _home, exe = claude_env
    base = resolve_profile("claude")
    configured = {"claude": AgentProfileSettings(
        command=shlex.join((exe, *base.command[1:])),
        resume=shlex.join((exe, *(base.resume or ())[1:])))}
    with scripted_server() as server:
        server.handler = lambda body: Reply.text("Noted: the secret word is PLUM.")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url.removesuffix("/v1"))
        ws = Workspace(project)
        first = AgentRace(ws, [resolve_profile("claude", configured)], "remember PLUM",
                          pick="manual", chooser=lambda rows: None, timeout=60).run()
        session = first.branches[0].session_id
        assert session
        seen = len(server.requests)
        server.handler = _handler(project)

        async def main() -> None:
            coordinator = ForkCoordinator(Agent(TestModel()), workspace=ws,
                                          external_runner=ExternalAgentRunner(ws.path,
                                                                              configured))
            await coordinator.fork([BranchSpec(label=f"c{i}", steer="now fix add()",
                                               model=f"agent:claude@{session}")
                                    for i in (1, 2)], parent_history=[])
            for _ in range(1200):
                if all(s.state != "running" for s in coordinator.inspect_branches()):
                    break
                await asyncio.sleep(0.05)
            assert {s.state for s in coordinator.inspect_branches()} == {"done"}
            await coordinator.merge_or_select("pick:c2")
            await coordinator.aclose()

        asyncio.run(main())
    forked = [r for r in server.requests[seen:] if r.get("tools")]
    assert len(forked) >= 2 and all("PLUM" in json.dumps(r["messages"]) for r in forked)
    assert (project / "calc.py").read_text() == FIXED
