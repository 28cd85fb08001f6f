"""Shared pieces for the fork widget / modal tests: streaming FunctionModel scripts, a real
``ForkCoordinator`` on a real workspace, tiny host apps, and screen-text helpers."""

from __future__ import annotations

import asyncio
import io
import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from rich.console import Console
from textual.app import App, ComposeResult
from textual.message import Message
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget

from branching_core.fork import BranchSpec, ForkCoordinator
from branching_core.workspace import Workspace
from tests.fork.helpers import first_branch_prompt, tool_results_after, user_prompts

PRICE_PER_RESPONSE = 0.01
os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")


@dataclass
class Turn:
    """One model response of a branch: ``text`` streamed chunk by chunk, then (optionally)
    a wait on ``gate``, then (optionally) one tool call."""

    text: Sequence[str] = ()
    gate: asyncio.Event | None = None
    tool: tuple[str, dict[str, Any]] | None = None
    fail: str | None = None
    """Raise ``RuntimeError(fail)`` after the text (the branch fails)."""


@dataclass
class StreamScript:
    """A streaming FunctionModel whose responses follow ``turns[steer]``.

    Response *n* of a branch is ``turns[steer][n]`` where *n* counts the tool results the
    branch received since its steer prompt; past the end it answers ``final``. Every
    request is recorded in ``received`` (steer -> list of user prompts seen in that
    request), so tests can check what each branch was actually told.
    """

    turns: dict[str, list[Turn]]
    final: str = ""
    received: dict[str, list[list[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.model = FunctionModel(self._respond, stream_function=self._stream, model_name="t2")

    def _turn(self, messages: list[ModelMessage]) -> tuple[str | None, Turn | None]:
        key = first_branch_prompt(messages, list(self.turns))
        if key is None:
            return None, None
        self.received.setdefault(key, []).append(user_prompts(messages))
        n = len(tool_results_after(messages, key))
        steps = self.turns[key]
        return key, steps[n] if n < len(steps) else None

    async def _stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        key, turn = self._turn(messages)
        if turn is None:
            yield self.final or f"{key}: finished"
            return
        for chunk in turn.text:
            yield chunk
            await asyncio.sleep(0)
        if turn.gate is not None:
            await turn.gate.wait()
        if turn.fail is not None:
            raise RuntimeError(turn.fail)
        if turn.tool is not None:
            name, args = turn.tool
            yield {
                0: DeltaToolCall(
                    name=name, json_args=json.dumps(args), tool_call_id=f"call-{name}-{key}"
                )
            }

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        key, turn = self._turn(messages)
        if turn is None:
            return ModelResponse(parts=[TextPart(self.final or f"{key}: finished")])
        if turn.gate is not None:
            await turn.gate.wait()
        if turn.fail is not None:
            raise RuntimeError(turn.fail)
        parts: list[Any] = [TextPart("".join(turn.text))] if turn.text else []
        if turn.tool is not None:
            parts.append(ToolCallPart(turn.tool[0], turn.tool[1]))
        return ModelResponse(parts=parts)


def make_project(root: Path) -> Workspace:
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.txt").write_text("hello\n")
    return Workspace(root)


def make_coordinator(
    ws: Workspace,
    script: StreamScript,
    *,
    price: float | None = PRICE_PER_RESPONSE,
    stream_text: bool = True,
    **kwargs: Any,
) -> ForkCoordinator:
    """A real coordinator running ``script`` on real workspace branches (fixed price)."""
    agent: Agent[None, str] = Agent(script.model)
    return ForkCoordinator(
        agent,
        workspace=ws,
        stream_text=stream_text,
        price_fn=lambda response: price,
        **kwargs,
    )


async def start_fork(
    coord: ForkCoordinator,
    steers: dict[str, str],
    *,
    budgets: dict[str, float] | None = None,
    aggregate_budget_usd: float | None = None,
) -> None:
    specs = [
        BranchSpec(label=label, steer=steer, budget_usd=(budgets or {}).get(label))
        for label, steer in steers.items()
    ]
    await coord.fork(specs, parent_history=[], aggregate_budget_usd=aggregate_budget_usd)


class HostApp(App[None]):
    """Hosts one widget, built lazily by ``factory`` (so it can be swapped in tests)."""

    def __init__(self, factory: Callable[[], Widget] | None = None) -> None:
        super().__init__()
        self.factory = factory
        self.results: list[Any] = []
        self.messages: list[Message] = []

    def compose(self) -> ComposeResult:
        if self.factory is not None:
            yield self.factory()

    def on_fork_area_selected(self, message: Message) -> None:
        self.messages.append(message)

    def on_fork_area_approval_requested(self, message: Message) -> None:
        self.messages.append(message)

    def on_fork_area_resolved(self, message: Message) -> None:
        self.messages.append(message)

    def on_fork_tabs_widget_selected(self, message: Message) -> None:
        self.messages.append(message)

    def open_modal(self, modal: Screen[Any]) -> None:
        """Push ``modal``; its dismiss value is appended to ``results``."""
        self.push_screen(modal, callback=self.results.append)


def screen_text(app: App[Any]) -> str:
    """The text of every cell of the current screen, line by line, as the terminal shows it.

    Same composition as ``App.export_screenshot`` (which is what snapshots store), exported
    as plain text instead of SVG so tests can search it.
    """
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False
    )
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


def widget_is_on_screen(app: App[Any], widget: Widget) -> bool:
    """True when ``widget`` has a non-empty region inside the screen and is the topmost
    widget at its own top-left cell (not covered, not clipped away)."""
    region = widget.region
    if region.width == 0 or region.height == 0 or not widget.display:
        return False
    if not app.screen.region.contains_region(region):
        return False
    top, _ = app.screen.get_widget_at(region.x, region.y)
    return top is widget


async def wait_until(pilot: Pilot[Any], predicate: Callable[[], bool], *, steps: int = 300) -> None:
    """Let the app run until ``predicate()`` holds (bounded by ``steps`` short pauses)."""
    for _ in range(steps):
        if predicate():
            return
        await pilot.pause(0.01)
    raise AssertionError("condition not reached")


async def close_fork(coord: ForkCoordinator, *gates: asyncio.Event) -> None:
    """Release ``gates`` and discard whatever is left of the fork."""
    for gate in gates:
        gate.set()
    if not coord.is_resolved:
        await coord.abort_fork()
    await coord.aclose()
    await coord.flush()
