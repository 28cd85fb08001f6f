"""Shared fixtures for the TUI tests: a real workspace, the app, a recording FunctionModel.

``GatedModel`` is a real pydantic-ai ``FunctionModel`` with a streaming function. It behaves
like the offline model (``!cmd`` runs a shell command, ``ls`` lists, text is echoed), records
every request it receives (so tests assert on what a branch was actually told), and holds a
response while the latest prompt contains one of its gate keywords, so a branch stays
``running`` until the test releases it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from forkdeck.chat.screen import ChatScreen
from forkdeck.forkdeck_app import ForkdeckApp
from forkdeck.session import MODEL_ENV_KEYS, ChatSession
from pydantic_ai.messages import ModelMessage, ModelRequest, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from textual import events

from branching_core.agent import plan_response

TERMINAL = (120, 36)


def user_prompts(messages: list[ModelMessage]) -> list[str]:
    """Every user prompt in ``messages``, in order."""
    out: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if part.part_kind == "user-prompt":
                    content = part.content
                    out.append(content if isinstance(content, str) else json.dumps(content))
    return out


class GatedModel:
    """See the module docstring. ``model`` is the FunctionModel to hand to the app."""

    def __init__(self, name: str = "gated") -> None:
        self.requests: list[list[ModelMessage]] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.model = FunctionModel(self._respond, stream_function=self._stream, model_name=name)

    def gate(self, keyword: str) -> asyncio.Event:
        """Hold every response whose latest prompt contains ``keyword`` until set."""
        event = self.gates.setdefault(keyword, asyncio.Event())
        return event

    def release_all(self) -> None:
        for event in self.gates.values():
            event.set()

    def prompts_of(self, keyword: str) -> list[list[str]]:
        """For each request whose prompts include one containing ``keyword``: its prompts."""
        return [
            user_prompts(m) for m in self.requests if any(keyword in p for p in user_prompts(m))
        ]

    async def _hold(self, messages: list[ModelMessage]) -> None:
        prompts = user_prompts(messages)
        latest = prompts[-1] if prompts else ""
        for keyword, event in list(self.gates.items()):
            if keyword in latest:
                await event.wait()

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> Any:
        self.requests.append(list(messages))
        await self._hold(messages)
        return plan_response(messages, {t.name for t in info.function_tools}, variant="scripted")

    async def _stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        self.requests.append(list(messages))
        await self._hold(messages)
        response = plan_response(
            messages, {t.name for t in info.function_tools}, variant="scripted"
        )
        part = response.parts[0]
        if isinstance(part, ToolCallPart):
            yield {
                0: DeltaToolCall(
                    name=part.tool_name,
                    json_args=json.dumps(part.args),
                    tool_call_id=part.tool_call_id,
                )
            }
            return
        assert isinstance(part, TextPart)
        for word in part.content.split(" "):
            yield word + " "


@pytest.fixture(autouse=True)
def _no_model_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real provider: drop every key that would select one."""
    for key in (*MODEL_ENV_KEYS, "GEMINI_API_KEY", "CO_API_KEY", "XAI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("FORKDECK_DIFFTOOL", raising=False)
    monkeypatch.delenv("PYDANTIC_DEEP_DIFFTOOL", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.txt").write_text("hello\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("VALUE = 1\n")
    return root


@pytest.fixture
def gated() -> GatedModel:
    return GatedModel()


def make_app(root: Path, model: Any = None, *, recovery: bool = False) -> ForkdeckApp:
    session = ChatSession(root, requested_model=model)
    return ForkdeckApp(session, cursor_blink=False, offer_recovery=recovery)


async def wait_for(
    pilot: Any,
    predicate: Callable[[], bool],
    *,
    timeout: float = 20.0,
    what: str | Callable[[], object] = "",
) -> None:
    """Let the app run until ``predicate()`` holds; fail (saying ``what``) after ``timeout`` s.

    The timeout only turns a hang into a readable failure; no test asserts on time.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(
                f"timed out waiting for {what() if callable(what) else what or predicate}"
            )
        await pilot.pause(0.02)


async def ready(pilot: Any) -> None:
    """Wait until the session is prepared (model resolved, agent built)."""
    app = pilot.app
    await asyncio.wait_for(app.prepared.wait(), 20)
    await pilot.pause()


async def type_line(pilot: Any, text: str) -> None:
    """Type ``text`` into the focused input key by key, then Enter."""
    await pilot.press(*text)
    await pilot.press("enter")


async def submit(pilot: Any, text: str) -> None:
    """Put ``text`` in the chat input and press Enter (fast; ``type_line`` types each key)."""
    from forkdeck.chat.chat_input import ChatInput

    entry = pilot.app.screen.query_one("#input", ChatInput)
    entry.focus()
    entry.value = text
    await pilot.press("enter")
    await pilot.pause()


async def parent_turn(pilot: Any, text: str) -> None:
    """Send ``text`` as a chat turn and wait until it is answered and in the history."""
    await submit(pilot, text)
    chat = chat_screen(pilot.app)
    await wait_for(pilot, lambda: not chat.turn_running and bool(pilot.app.session.history))


# ---------------------------------------------------------------- Pilot helpers shared by files


S = TypeVar("S")


def screen_as(app: Any, kind: type[S]) -> S:
    """The screen in front, which the test expects to be a ``kind``."""
    screen = app.screen
    assert isinstance(screen, kind), f"expected {kind.__name__} in front, not {screen!r}"
    return screen


def chat_screen(app: Any) -> ChatScreen:
    """The app's chat screen (whatever modal is in front of it)."""
    chat = app.chat
    assert isinstance(chat, ChatScreen)
    return chat


def burst(app: Any, *keys: str) -> None:
    """Queue ``keys`` at once (one terminal read): single characters are typed text."""
    for key in keys:
        if len(key) == 1:
            name = {" ": "space", "!": "exclamation_mark", ">": "greater_than_sign"}.get(key, key)
            app.post_message(events.Key(name, key))
        else:
            app.post_message(events.Key(key, "\r" if key == "enter" else None))


def typed(text: str) -> list[str]:
    return list(text)


async def settle(pilot: Any) -> None:
    for _ in range(4):
        await pilot.pause()


async def open_fork(pilot: Any, steers: list[str], *, aggregate: str = "") -> Any:
    """``/fork``, fill one steer per row, submit; returns the mounted ``ForkArea``."""
    from forkdeck.fork.fork_picker import ForkPickerModal
    from textual.widgets import Input

    app = pilot.app
    if app.session.settings.fork_branch_count != len(steers):
        await submit(pilot, f"/fork-branches {len(steers)}")
    await submit(pilot, "/fork")
    await wait_for(pilot, lambda: isinstance(app.screen, ForkPickerModal), what="the picker")
    picker = app.screen
    assert picker.n == len(steers)
    for slot, steer in enumerate(steers, start=1):
        picker.query_one(f"#steer-{slot}", Input).value = steer
    picker.query_one("#aggregate", Input).value = aggregate
    await pilot.press("ctrl+s")
    chat = chat_screen(app)
    await wait_for(pilot, lambda: chat.fork_area is not None, what="the fork area")
    return chat.fork_area


async def open_held_fork(pilot: Any, gated: GatedModel) -> Any:
    """A fork of two branches (``hold a``, ``hold b``) that both asked ``gated``'s model and
    are held there (running) until the test releases the ``hold`` gate."""
    gated.gate("hold")
    area = await open_fork(pilot, ["hold a", "hold b"])
    await wait_for(pilot, lambda: len(gated.requests) == 2, what="both branches asked")
    return area


async def open_done_fork(pilot: Any) -> Any:
    """A fork whose branches ``a`` and ``b`` wrote ``a.txt`` and ``b.txt`` and are done."""
    area = await open_fork(pilot, ["!echo a > a.txt", "!echo b > b.txt"])
    app = pilot.app
    await wait_for(pilot, lambda: set(states(app).values()) == {"done"}, what="done")
    return area


def states(app: Any) -> dict[str, str]:
    """Each branch's state in the open fork, by label."""
    coordinator = app.session.coordinator
    return {s.label: s.state for s in coordinator.inspect_branches()}


async def escape(pilot: Any, until: type | None = None) -> Any:
    """Press Esc; with ``until``, wait until a screen of that type is in front (a confirm
    dialog, or back on the chat). Returns the screen in front."""
    await pilot.press("escape")
    if until is not None:
        await wait_for(
            pilot, lambda: isinstance(pilot.app.screen, until), what=f"{until.__name__} in front"
        )
    return pilot.app.screen
