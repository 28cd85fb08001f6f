"""Hostile tool arguments: every failure is a ToolFailed the model reads, never a crash.

The fuzz cases run twice: directly against the toolset, and through a real pydantic-ai
Agent whose FunctionModel calls every tool with every hostile argument; the run must end
normally and neither the workspace nor the directory next to it may change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from branching_core.agent import LocalCommandRunner, WorkspaceToolset, create_workspace_toolset

from .conftest import snapshot

LONG = "a" * 300
HOSTILE_PATHS: list[str] = [
    LONG,
    f"src/{LONG}",
    f"{LONG}/x.txt",
    "x" * 5000,
    "a\x00b",
    "..",
    "../outside/secret.txt",
    "src/../../outside/secret.txt",
    "/etc/passwd",
    "/",
    "",
    ".",
    "out",
    "out/secret.txt",
    "loop",
    "loop/x",
    "fifo",
    "src",
    "hello.txt/child",
    ".pydantic-deep/config.toml",
    "\udcff\udcfe",
    "dev-null",
]
DELETABLE = ("dev-null", "out", "loop", "fifo")  # links and a FIFO: deleting them is legitimate
HOSTILE_PATTERNS: list[str] = [
    "[z-a]",
    "[",
    "(",
    "*" * 400,
    "**/" * 200,
    "a" * 5000,
    "\x00",
    "/abs/*",
    "../*",
    "",
    "[[:alpha:]]",
    "(?P<x",
    "\\",
    "[!]",
    "\udcff*",
]


@pytest.fixture
def hostile_ws(ws: Path, outside: Path) -> Path:
    """The shared workspace plus the awkward things a repository can hold."""
    (ws / "out").symlink_to(outside)
    (ws / "loop").symlink_to("loop")
    (ws / "dev-null").symlink_to("/dev/null")
    os.mkfifo(ws / "fifo")
    (ws / os.fsdecode(b"bad-\xff-name.txt")).write_text("not utf-8 name\n")
    (ws / ".pydantic-deep").mkdir()
    (ws / ".pydantic-deep" / "config.toml").write_text("[fork]\nbranches = 2\n")
    return ws


@pytest.fixture
def hostile_tools(hostile_ws: Path) -> WorkspaceToolset:
    return create_workspace_toolset(
        hostile_ws, command_runner=LocalCommandRunner(), command_timeout=10
    )


def hostile_calls() -> list[tuple[str, dict[str, Any]]]:
    """Calls that must all fail or change nothing (no valid write among them)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for path in HOSTILE_PATHS:
        calls += [
            ("read_file", {"path": path}),
            ("read_file", {"path": path, "offset": -5, "limit": -1}),
            ("read_file", {"path": path, "offset": 10**18, "limit": 10**18}),
            ("list_dir", {"path": path}),
            None if path in DELETABLE else ("delete_file", {"path": path}),
            ("edit_file", {"path": path, "old": "zzz-not-there", "new": "y"}),
            ("edit_file", {"path": path, "old": "", "new": "y"}),
        ]
        if path not in ("\udcff\udcfe",):  # a valid new name: writing it is allowed
            calls.append(("write_file", {"path": path, "content": "x"}))
    for pattern in HOSTILE_PATTERNS:
        calls += [
            ("glob", {"pattern": pattern}),
            ("grep", {"pattern": pattern}),
            ("grep", {"pattern": "x", "path_glob": pattern}),
        ]
    calls.append(("read_file", {"path": "hello.txt", "offset": 10**18, "limit": -(10**18)}))
    calls.append(("run_command", {"command": ""}))
    calls.append(("run_command", {"command": "   "}))
    return [c for c in calls if c is not None]


def assert_printable(text: str) -> None:
    text.encode("utf-8")  # a provider's JSON encoder would reject lone surrogates


def test_the_reported_crashes_are_tool_failures(tools: WorkspaceToolset, ws: Path) -> None:
    """The cases from the issue: each one used to raise OSError or re.error."""
    before = snapshot(ws)
    for call in (
        lambda: tools.read_file(LONG),
        lambda: tools.write_file(LONG, "x"),
        lambda: tools.list_dir(LONG),
        lambda: tools.edit_file(LONG, "a", "b"),
        lambda: tools.delete_file(LONG),
    ):
        with pytest.raises(ToolFailed, match="File name too long"):
            call()
    assert tools.glob(f"{LONG}/{LONG}/*").startswith("no paths match")
    with pytest.raises(ToolFailed, match="invalid glob pattern"):
        tools.glob("[z-a]")
    with pytest.raises(ToolFailed, match="invalid glob pattern"):
        tools.grep("x", "[z-a]")
    assert snapshot(ws) == before


def test_long_messages_do_not_echo_the_whole_name(tools: WorkspaceToolset) -> None:
    with pytest.raises(ToolFailed) as info:
        tools.read_file("x" * 5000)
    assert len(info.value.message) < 200 and "5000 chars" in info.value.message


def test_non_utf8_names_are_shown_printably(hostile_tools: WorkspaceToolset) -> None:
    for out in (hostile_tools.list_dir("."), hostile_tools.glob("*"), hostile_tools.grep("utf")):
        assert_printable(out)
        assert "bad-\\xff-name.txt" in out


def test_fuzz_direct(
    hostile_tools: WorkspaceToolset,
    hostile_ws: Path,
    outside: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    before, before_outside = snapshot(hostile_ws), snapshot(outside)
    failures = 0
    for tool, args in hostile_calls():
        func = getattr(hostile_tools, tool)
        try:
            result = func(**args) if tool != "run_command" else None
        except ToolFailed as exc:
            failures += 1
            assert_printable(exc.message)
            assert exc.message.strip(), (tool, args)
            continue
        if result is not None:
            assert isinstance(result, str) and result, (tool, args)
            assert_printable(result)
        assert tool not in ("write_file", "edit_file", "delete_file"), (tool, args, result)
    assert failures > 100
    assert snapshot(hostile_ws) == before
    assert snapshot(outside) == before_outside
    # every failure was foreseen at its cause, none needed the guard's safety net
    assert not [r for r in caplog.records if "failed unexpectedly" in r.getMessage()]


async def test_fuzz_through_an_agent(
    hostile_tools: WorkspaceToolset,
    hostile_ws: Path,
    outside: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A model that calls every tool with garbage, a batch per response: the run ends with
    the model's own answer, every call got a result, nothing on disk changed."""
    # a model speaks JSON: lone surrogates cannot reach a tool through it
    calls = [c for c in hostile_calls() if "\\ud" not in json.dumps(c[1])]
    batches = [calls[i : i + 25] for i in range(0, len(calls), 25)]
    # one call of a wrong type per tool: pydantic-ai's own validation asks for a retry
    batches.append([("read_file", {"path": 42, "offset": "many"}), ("grep", {"pattern": None})])
    before, before_outside = snapshot(hostile_ws), snapshot(outside)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < len(batches):
            return ModelResponse(
                parts=[
                    ToolCallPart(tool, json.dumps(args, ensure_ascii=True), tool_call_id=f"c{n}")
                    for n, (tool, args) in enumerate(batches[step])
                ]
            )
        return ModelResponse(parts=[TextPart("survived")])

    result = await Agent(FunctionModel(model), toolsets=[hostile_tools]).run("attack")
    assert result.output == "survived"
    parts = [p for m in result.all_messages() for p in m.parts]
    returns = [p for p in parts if isinstance(p, ToolReturnPart)]
    retries = [p for p in parts if isinstance(p, RetryPromptPart)]
    assert len(returns) + len(retries) == sum(len(b) for b in batches)
    failed = [p for p in returns if p.outcome == "failed"]
    assert len(failed) > 100
    for part in returns:
        assert_printable(part.model_response_str())
    assert snapshot(hostile_ws) == before
    assert snapshot(outside) == before_outside
    assert not [r for r in caplog.records if "failed unexpectedly" in r.getMessage()]


def test_an_unforeseen_error_becomes_a_tool_failure(tools: WorkspaceToolset, ws: Path) -> None:
    """The safety net: an exception no check foresaw still reaches the model as text."""
    tools.max_output_chars = None  # type: ignore[assignment]  # breaks truncate_middle
    with pytest.raises(ToolFailed, match="read_file failed: TypeError"):
        tools.read_file("hello.txt")
