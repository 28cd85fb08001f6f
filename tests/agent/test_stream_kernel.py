"""The small kernel fork branches and sub-agents share (issue 15): one typed translator of
pydantic-ai stream events, one event hub, one usage meter, one set of final states."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    TextPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.usage import RequestUsage

from branching_core.agent.hub import EventHub
from branching_core.agent.pricing import UsageMeter
from branching_core.agent.stream import (
    StreamItem,
    TextChunk,
    ToolCalled,
    ToolReturned,
    stream_text,
    translate,
)
from branching_core.fork.types import FINAL_STATES
from branching_core.live.subagents.transcript import FINAL_RUN_STATES
from branching_core.run_states import SHARED_FINAL_STATES


def _answered(messages: list[ModelMessage]) -> bool:
    return any(
        isinstance(m, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in m.parts)
        for m in messages
    )


async def _stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    if not _answered(messages):
        yield {0: DeltaToolCall(name="double", json_args='{"x": 21}', tool_call_id="c1")}
        return
    yield "all "
    yield "good"


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if not _answered(messages):
        return ModelResponse(parts=[ToolCallPart("double", {"x": 21}, tool_call_id="c1")])
    return ModelResponse(parts=[TextPart("all good")])


def test_a_real_agent_run_translates_to_text_tool_calls_and_results() -> None:
    agent = Agent(FunctionModel(_respond, stream_function=_stream))

    @agent.tool_plain
    def double(x: int) -> int:
        return 2 * x

    async def run() -> list[StreamItem]:
        items: list[StreamItem] = []
        async with agent.iter("go") as arun:
            async for node in arun:
                if Agent.is_model_request_node(node) or Agent.is_call_tools_node(node):
                    async with node.stream(arun.ctx) as events:
                        async for event in events:
                            item = translate(event)
                            if item is not None:
                                items.append(item)
        return items

    assert asyncio.run(run()) == [
        ToolCalled(tool_name="double", args='{"x": 21}', tool_call_id="c1"),
        ToolReturned(tool_name="double", tool_call_id="c1", content="42", outcome="success"),
        TextChunk("all "),
        TextChunk("good"),
    ]


def test_thinking_is_not_text() -> None:
    # Before: any delta with a ``content_delta`` attribute counted as text, so a thinking
    # model's thoughts reached the fork branch's text stream.
    event = PartDeltaEvent(index=0, delta=ThinkingPartDelta(content_delta="hmm"))
    assert stream_text(event) is None and translate(event) is None


def test_one_hub_delivers_to_listeners_and_queues_and_survives_a_broken_listener() -> None:
    async def run() -> tuple[list[str], str]:
        hub: EventHub[str] = EventHub("test event")
        seen: list[str] = []

        def broken(_: str) -> None:
            raise RuntimeError("listener bug")

        hub.add_listener(broken)
        remove = hub.add_listener(seen.append)
        queue = hub.subscribe()
        hub.publish("a")
        remove()
        hub.publish("b")
        return seen, queue.get_nowait() + queue.get_nowait()

    seen, queued = asyncio.run(run())
    assert seen == ["a"] and queued == "ab"


def test_one_meter_prices_counts_and_caps() -> None:
    meter = UsageMeter()
    response = ModelResponse(
        parts=[TextPart("x")], usage=RequestUsage(input_tokens=10, output_tokens=5)
    )
    assert meter.add(response, lambda _: 0.5) == 0.5
    assert (meter.requests, meter.input_tokens, meter.output_tokens) == (1, 10, 5)
    assert not meter.over(0.5) and meter.over(0.4)
    meter.add(response, lambda _: None)  # a model nobody can price
    assert meter.cumulative_usd is None and not meter.over(0.0)


def test_fork_branches_and_sub_agents_name_their_final_states_alike() -> None:
    assert SHARED_FINAL_STATES <= FINAL_STATES
    assert SHARED_FINAL_STATES <= FINAL_RUN_STATES
    assert "succeeded" not in FINAL_RUN_STATES and "cancelled" not in FINAL_RUN_STATES
