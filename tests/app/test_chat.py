"""The chat screen on a real workspace: greeting, streamed turns, tool calls, input, keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from forkdeck.chat.chat_input import ChatInput
from forkdeck.chat.message_list import AssistantMessage, MessageList, ToolCallView
from forkdeck.tui import main

from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    chat_screen,
    make_app,
    ready,
    type_line,
    wait_for,
)

REPO = Path(__file__).resolve().parents[2]


async def test_without_a_key_it_greets_with_the_offline_model_and_how_to_configure(
    project: Path,
) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        text = "\n".join(chat.messages.transcript())
        assert "offline model" in text
        for hint in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "--model", "[model]", "config.toml"):
            assert hint in text
        status = chat.status.text
        assert "offline (scripted, no LLM)" in status
        assert app.session.workspace is not None
        assert f"workspace {app.session.workspace.fstype}" in status
        assert app.session.offline


async def test_a_bad_model_name_falls_back_to_offline_and_says_why(project: Path) -> None:
    app = make_app(project, "nosuchprovider:some-model")
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        text = "\n".join(chat_screen(app).messages.transcript())
        assert "unknown model provider 'nosuchprovider'" in text
        assert "using the offline model instead" in text
        assert app.session.offline


async def test_a_turn_streams_text_runs_tools_and_keeps_the_history(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await type_line(pilot, "ls src")
        await wait_for(
            pilot,
            lambda: not chat.turn_running and len(app.session.history) == 4,
            what=lambda: (len(app.session.history), chat.messages.transcript()),
        )
        tool = chat.messages.query_one(ToolCallView)
        assert tool.tool_name == "list_dir"
        assert tool.ok is True
        assert "app.py" in (tool.result_text or "")
        answer = chat.messages.query(AssistantMessage).last()
        assert answer.text.startswith("Done: 1 step.")
        # What the model received: the prompt the user typed, nothing else.
        assert [p for p in gated.prompts_of("ls src")[0]] == ["ls src"]
        # A second turn carries the first one's history.
        await type_line(pilot, "and then?")
        await wait_for(pilot, lambda: not chat.turn_running and len(app.session.history) == 6)
        assert gated.prompts_of("and then?")[-1] == ["ls src", "and then?"]
        totals = app.session.totals
        assert totals.requests == 3 and totals.input_tokens > 0 and totals.output_tokens > 0
        assert f"tokens {totals.input_tokens:,} in / {totals.output_tokens:,} out" in (
            chat.status.text
        )


async def test_streamed_text_arrives_delta_by_delta(project: Path, gated: GatedModel) -> None:
    app = make_app(project, gated.model)
    seen: list[str] = []
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        original = MessageList.on_text

        def spy(self: MessageList, delta: str) -> None:
            seen.append(delta)
            original(self, delta)

        chat.messages.on_text = spy.__get__(chat.messages)
        await type_line(pilot, "tell me three words")
        await wait_for(pilot, lambda: not chat.turn_running and bool(app.session.history))
    assert len(seen) > 3
    assert "".join(seen).startswith('offline model (no LLM) got "tell me three words"')


async def test_escape_stops_a_running_turn_and_keeps_a_valid_history(
    project: Path, gated: GatedModel
) -> None:
    gated.gate("slowly")
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await type_line(pilot, "answer slowly")
        await wait_for(pilot, lambda: bool(gated.requests), what="the model was asked")
        assert chat.turn_running
        await pilot.press("escape")
        await wait_for(pilot, lambda: not chat.turn_running)
        assert "turn stopped" in chat.last_notice
        # The stopped turn leaves no dangling request: the next turn works.
        await type_line(pilot, "hello again")
        await wait_for(pilot, lambda: not chat.turn_running and bool(app.session.history))
        assert gated.prompts_of("hello again")[-1][-1] == "hello again"


async def test_input_history_up_and_down(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await type_line(pilot, "/fork-branches")
        await type_line(pilot, "/tokens")
        await pilot.press(*"draft")
        entry = chat.query_one(ChatInput)
        await pilot.press("up")
        assert entry.value == "/tokens"
        await pilot.press("up")
        assert entry.value == "/fork-branches"
        await pilot.press("up")
        assert entry.value == "/fork-branches"
        await pilot.press("down", "down")
        assert entry.value == "draft"


async def test_first_keys_typed_at_start_are_not_dropped(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press(*"abc")  # before the session is even prepared
        assert chat_screen(app).input.value == "abc"


async def test_ctrl_g_returns_focus_to_the_input(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        chat.messages.focus()
        await pilot.pause()
        assert app.focused is not chat.input
        await pilot.press("ctrl+g")
        assert app.focused is chat.input


async def test_shell_lines_run_in_the_workspace(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await type_line(pilot, "!echo made > made.txt && cat README.txt")
        await wait_for(pilot, lambda: "(exit 0)" in chat.last_notice)
        assert "hello" in chat.last_notice
    assert (project / "made.txt").read_text() == "made\n"


def test_main_refuses_a_missing_workspace_in_one_line(tmp_path: Path, capsys: object) -> None:
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.strip().count("\n") == 0
    assert "does not exist" in err


def test_forkdeck_help_runs_through_the_console_entry() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "forkdeck.entry", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--model" in done.stdout and "PATH" in done.stdout.upper()
