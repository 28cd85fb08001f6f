"""The offline scripted model driving real pydantic-ai Agents with the workspace toolset."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    TextPartDelta,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from branching_core.agent import (
    OfflineModel,
    WorkspaceToolset,
    display_name,
    parse_script,
    plan_response,
    response_cost_usd,
)
from branching_core.agent.offline import Step, plain_request_reply


def agent_for(tools: WorkspaceToolset, model: OfflineModel | None = None) -> Agent[None, str]:
    return Agent(model or OfflineModel(), toolsets=[tools])


def tool_calls(messages: list[ModelMessage]) -> list[ToolCallPart]:
    return [
        p
        for m in messages
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    ]


# -- the script language -------------------------------------------------------------------


def test_parse_script() -> None:
    script = parse_script(
        "please do this\n!echo hi > a.txt\n  !ls -la\n"
        "write notes/x.md\n# Title\n\n  indented\nend\n"
        "read a.txt\ndelete old.txt\nls\nls src\nglob **/*.py\ngrep TODO *.py\n"
        "write a poem about cats\nthanks"
    )
    assert script.steps == (
        Step("run_command", {"command": "echo hi > a.txt"}),
        Step("run_command", {"command": "ls -la"}),
        Step("write_file", {"path": "notes/x.md", "content": "# Title\n\n  indented\n"}),
        Step("read_file", {"path": "a.txt"}),
        Step("delete_file", {"path": "old.txt"}),
        Step("list_dir", {"path": "."}),
        Step("list_dir", {"path": "src"}),
        Step("glob", {"pattern": "**/*.py"}),
        Step("grep", {"pattern": "TODO", "path_glob": "*.py"}),
    )
    assert script.text == ("please do this", "write a poem about cats", "thanks")


def test_write_block_without_end_takes_the_rest() -> None:
    assert parse_script("write a.txt\none\ntwo").steps == (
        Step("write_file", {"path": "a.txt", "content": "one\ntwo\n"}),
    )


# -- driving an Agent ----------------------------------------------------------------------


async def test_shell_line_creates_the_file(tools: WorkspaceToolset, ws: Path) -> None:
    result = await agent_for(tools).run("!echo hi > a.txt")
    assert (ws / "a.txt").read_text() == "hi\n"
    assert result.output == "Done: 1 step.\n- run_command `echo hi > a.txt`: exit code 0"
    assert [c.args for c in tool_calls(result.all_messages())] == [{"command": "echo hi > a.txt"}]


async def test_write_block_writes_the_content(tools: WorkspaceToolset, ws: Path) -> None:
    result = await agent_for(tools).run("write docs/plan.md\n# Plan\n- step one\nend\n")
    assert (ws / "docs" / "plan.md").read_text() == "# Plan\n- step one\n"
    assert "write_file docs/plan.md: created docs/plan.md (18 bytes)" in result.output


async def test_steps_run_in_order_one_per_response(tools: WorkspaceToolset, ws: Path) -> None:
    result = await agent_for(tools).run("!mkdir -p d\n!echo one > d/x\nread d/x\n!rm d/x\nls d")
    assert not (ws / "d" / "x").exists()
    responses = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
    assert [len(tool_calls([r])) for r in responses] == [1, 1, 1, 1, 1, 0]
    assert "- read_file d/x: one" in result.output
    assert "- list_dir d: (d is empty)" in result.output


async def test_a_plain_request_is_answered_with_help_not_an_echo(tools: WorkspaceToolset) -> None:
    """Issue 24.6: a newcomer's first request gets what works offline and how to get a real
    model, in a few lines; a later plain request (a fork's steer) only its first line."""
    result = await agent_for(tools).run("fix the bug in calc.py so the test passes")
    lines = result.output.splitlines()
    assert lines[0] == (
        'offline model (no LLM) got "fix the bug in calc.py so the test passes": it cannot '
        "read requests, it runs scripted steps."
    )
    assert 3 <= len(lines) <= 5
    assert "forkdeck demo" in result.output and "--model" in result.output
    assert "forkdeck models" in result.output
    assert tool_calls(result.all_messages()) == []
    again = await agent_for(tools).run(
        "Branch B: try the hash table approach", message_history=result.all_messages()
    )
    assert again.output == (
        'offline model (no LLM) got "Branch B: try the hash table approach": it cannot read '
        "requests, it runs scripted steps."
    )


async def test_failed_steps_are_summarised(tools: WorkspaceToolset) -> None:
    result = await agent_for(tools).run("read ../etc/passwd\n!exit 4")
    assert "- read_file ../etc/passwd: failed: refused:" in result.output
    assert "- run_command `exit 4`: exit code 4" in result.output


async def test_only_offered_tools_are_called(ws: Path) -> None:
    result = await Agent(OfflineModel()).run("!touch x\nhello")
    assert tool_calls(result.all_messages()) == []
    assert "skipped (no run_command tool here)" in result.output
    assert "Also received: hello" in result.output
    assert not (ws / "x").exists()


async def test_follow_up_prompt_drives_the_next_turn(tools: WorkspaceToolset, ws: Path) -> None:
    agent = agent_for(tools)
    first = await agent.run("!echo 1 > one.txt")
    second = await agent.run(
        "!echo 2 > two.txt\nand then stop", message_history=first.all_messages()
    )
    assert (ws / "one.txt").exists() and (ws / "two.txt").exists()
    assert len(tool_calls(second.all_messages())) == 2
    assert "run_command `echo 2 > two.txt`" in second.output and "one.txt" not in second.output


def test_steering_message_replaces_the_rest_of_the_script() -> None:
    """A user message that arrives with tool results (steering) is the new script."""
    tools = {"run_command", "write_file"}
    history = [
        ModelRequest(parts=[UserPromptPart("!step one\n!step two")]),
        ModelResponse(
            parts=[ToolCallPart("run_command", {"command": "step one"}, tool_call_id="offline-1")]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("run_command", "exit code 0", tool_call_id="offline-1"),
                UserPromptPart(">>a: switch to plan B"),
            ]
        ),
    ]
    reply = plan_response(history, tools, variant="scripted")
    assert reply.text is not None
    assert reply.text.startswith('offline model (no LLM) got ">>a: switch to plan B"')
    history[-1].parts[1] = UserPromptPart("!plan b")
    call = plan_response(history, tools, variant="scripted").parts[0]
    assert isinstance(call, ToolCallPart) and call.args == {"command": "plan b"}
    assert call.tool_call_id == "offline-2"


async def test_deterministic(tmp_path: Path) -> None:
    from branching_core.agent import LocalCommandRunner, create_workspace_toolset

    outputs = []
    for name in ("one", "two"):
        root = tmp_path / name
        root.mkdir()
        tools = create_workspace_toolset(root, command_runner=LocalCommandRunner())
        result = await agent_for(tools).run("write a.txt\nx\nend\n!cat a.txt\nls")
        outputs.append(
            (
                result.output,
                [(c.tool_name, c.args, c.tool_call_id) for c in tool_calls(result.all_messages())],
            )
        )
    assert outputs[0] == outputs[1]


# -- streaming, usage, names -----------------------------------------------------------------


async def test_streaming_yields_several_text_deltas(tools: WorkspaceToolset) -> None:
    agent = agent_for(tools)
    async with agent.run_stream("tell the other branches that the cache idea works") as stream:
        deltas = [d async for d in stream.stream_text(delta=True, debounce_by=None)]
    assert len(deltas) >= 5
    assert "".join(deltas) == plain_request_reply(
        "tell the other branches that the cache idea works"
    )


async def test_streamed_run_with_tools(tools: WorkspaceToolset, ws: Path) -> None:
    async with agent_for(tools).run_stream_events("!echo streamed > s.txt\nok") as stream:
        events = [e async for e in stream]
    assert (ws / "s.txt").read_text() == "streamed\n"
    calls = [e.part for e in events if isinstance(e, FunctionToolCallEvent)]
    assert [(c.tool_name, c.args_as_dict()) for c in calls] == [
        ("run_command", {"command": "echo streamed > s.txt"})
    ]
    text_deltas = [
        e.delta.content_delta
        for e in events
        if isinstance(e, PartDeltaEvent) and isinstance(e.delta, TextPartDelta)
    ]
    assert len(text_deltas) >= 3


async def test_usage_is_reported_and_costs_nothing(tools: WorkspaceToolset) -> None:
    result = await agent_for(tools).run("!true\nls")
    usage = result.usage
    assert usage.requests == 3 and usage.tool_calls == 2
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    responses = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
    assert all(r.model_name == "offline" for r in responses)
    assert all(response_cost_usd(r) == 0.0 for r in responses)


def test_names_say_offline() -> None:
    model = OfflineModel()
    assert model.model_name == "offline" and model.system == "offline"
    assert display_name(model) == "offline (scripted, no LLM)"
    slow = OfflineModel("slow")
    assert slow.model_name == "offline:slow" and slow.delay > 0
    assert display_name(slow) == "offline:slow (scripted, no LLM)"
    assert OfflineModel() == OfflineModel() and OfflineModel() != slow
    with pytest.raises(ValueError, match="unknown offline variant"):
        OfflineModel("bogus")


async def test_echo_variant_never_calls_tools(tools: WorkspaceToolset, ws: Path) -> None:
    result = await agent_for(tools, OfflineModel("echo")).run("!touch x")
    assert result.output == "offline model (no LLM) received: !touch x"
    assert not (ws / "x").exists()


async def test_slow_variant_streams_with_pauses(tools: WorkspaceToolset) -> None:
    import time

    agent = agent_for(tools, OfflineModel("slow"))
    start = time.monotonic()
    async with agent.run_stream("one two three four") as stream:
        deltas = [d async for d in stream.stream_text(delta=True, debounce_by=None)]
    assert len(deltas) >= 5
    assert time.monotonic() - start >= 5 * 0.05
