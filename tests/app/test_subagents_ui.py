"""Sub-agent runs (seed 002) in the chat: an expandable ``branch`` tool call with the
sub-agent's own transcript, kept after it returns."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from forkdeck.chat.message_list import MessageList, ToolCallView
from forkdeck.forkdeck_app import ForkdeckApp
from forkdeck.session import ChatSession
from forkdeck.tui import load_subagents, main
from pydantic import BaseModel
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from branching_core.live.subagents import SubAgent, SubAgentBranches
from tests.app.conftest import TERMINAL, ready, submit, wait_for


class Claim(BaseModel):
    claim: str


class Verdict(BaseModel):
    holds: bool


def _returned(messages: list[ModelMessage]) -> bool:
    return any(
        p.part_kind == "tool-return"
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
    )


async def _parent_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    """The chat agent delegates once to the checker, then answers."""
    if not _returned(messages):
        yield {
            0: DeltaToolCall(
                name="branch", json_args=json.dumps({"name": "Checker", "claim": "2+2=4"})
            )
        }
    else:
        yield "the checker agrees"


def _checker(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if not _returned(messages):
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": "checked.txt", "content": "ok\n"})]
        )
    return ModelResponse(parts=[ToolCallPart("__finish__", {"holds": True})])


CHECKER = SubAgent(
    name="Checker",
    description="Check one claim.",
    model=FunctionModel(_checker, model_name="checker"),
    initial_input=Claim,
    final_output=Verdict,
)


async def test_a_sub_agent_run_shows_as_an_expandable_tool_call(project: Path) -> None:
    subagents = SubAgentBranches(definitions=[CHECKER])
    parent = FunctionModel(stream_function=_parent_stream, model_name="parent")
    session = ChatSession(project, requested_model=parent, subagents=subagents)
    app = ForkdeckApp(session, cursor_blink=False, offer_recovery=False)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await submit(pilot, "check it")
        views = lambda: list(app.screen.query(ToolCallView))  # noqa: E731
        await wait_for(
            pilot,
            lambda: any(v.subagent_text and "· done" in v.subagent_text for v in views()),
            what=lambda: [v.subagent_text for v in views()],
        )
        (view,) = [v for v in views() if v.tool_name == "branch"]
        text = view.subagent_text or ""
        assert text.startswith("sub-agent Checker · done")
        assert "checked.txt" in text and "write_file" in text
        view.collapsed = False
        await pilot.pause()
        assert view.query_one(".tool-subagent").display
        await wait_for(
            pilot,
            lambda: (
                "the checker agrees" in "\n".join(app.screen.query_one(MessageList).transcript())
            ),
        )
    # the sub-agent succeeded, so its branch's file landed in the workspace
    assert (project / "checked.txt").read_text() == "ok\n"
    assert [r.state for r in subagents.runs] == ["done"]


def test_subagents_flag_loads_definitions_and_refuses_bad_specs(project: Path, capsys: Any) -> None:
    loaded = load_subagents("tests.app.test_subagents_ui:CHECKER")
    assert isinstance(loaded, SubAgentBranches) and [d.name for d in loaded.definitions] == [
        "Checker"
    ]
    assert main([str(project), "--subagents", "nope"]) == 2
    assert "MODULE:NAME" in capsys.readouterr().err
    assert main([str(project), "--subagents", "tests.app.test_subagents_ui:Claim"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("forkdeck: --subagents") and "got ModelMetaclass" in err and "\n" not in err
    )
