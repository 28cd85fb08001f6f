"""Commands: parsing, the active-fork allow-list, settings written through, one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from forkdeck.chat.screen import ChatScreen
from forkdeck.command_registry import REGISTRY
from forkdeck.commands import (
    ALLOWED_DURING_FORK,
    COMMANDS,
    CommandError,
    Prompt,
    Shell,
    Slash,
    Steer,
    blocked_reason,
    parse_input,
    resolve,
)

from tests.app.conftest import TERMINAL, make_app, parent_turn, ready, submit, type_line, wait_for


def _config(root: Path) -> dict:
    return tomllib.loads((root / ".pydantic-deep" / "config.toml").read_text())


# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("hello there", Prompt("hello there")),
        ("/fork", Slash("fork")),
        ("/fork diff src/app.py", Slash("fork", ("diff", "src/app.py"))),
        ("/FORK-BUDGET aggregate 2", Slash("fork-budget", ("aggregate", "2"))),
        (">>a focus on tests", Steer("a", "focus on tests")),
        (">> b  try again ", Steer("b", "try again")),
        ("!ls -la", Shell("ls -la")),
        ("   ", None),
        ("// not a command", Prompt("// not a command")),
    ],
)
def test_parse_input(line: str, parsed: object) -> None:
    assert parse_input(line) == parsed


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/frobnicate", "unknown command /frobnicate"),
        (">>a", "usage: >>label message"),
        (">>", "usage: >>label message"),
        ("!", "usage: !command"),
    ],
)
def test_bad_lines_get_one_line_errors(line: str, message: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_input(line)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_allow_list_during_a_fork() -> None:
    for name in ALLOWED_DURING_FORK:
        assert blocked_reason(Slash(name), fork_active=True) is None
    assert blocked_reason(Slash("fork", ("diff",)), fork_active=True) is None
    assert blocked_reason(Steer("a", "x"), fork_active=True) is None
    assert blocked_reason(Shell("ls"), fork_active=True, on_branch_tab=True) is None
    on_overview = blocked_reason(Shell("ls"), fork_active=True)  # would hit the parent
    assert on_overview is not None and "pick a branch tab" in on_overview
    for name in ("fork", "fork-branches", "fork-budget", "fork-model", "clear"):
        reason = blocked_reason(Slash(name), fork_active=True)
        assert reason is not None and f"/{name} is blocked" in reason
    plain = blocked_reason(Prompt("hi"), fork_active=True)
    assert plain is not None and ">>label" in plain
    assert blocked_reason(Prompt("hi"), fork_active=True, on_branch_tab=True) is None
    # Without a fork nothing is blocked but the fork-only forms.
    assert blocked_reason(Prompt("hi"), fork_active=False) is None
    assert blocked_reason(Steer("a", "x"), fork_active=False) is not None
    assert set(ALLOWED_DURING_FORK) <= set(COMMANDS)


# ----------------------------------------------------------------------------- the registry


def test_every_registered_command_has_a_handler_and_a_help_line() -> None:
    """Declared once: what dispatch runs is what /help, Tab and the palette list."""
    help_lines = REGISTRY.help_text().splitlines()
    for command in REGISTRY:
        assert callable(command.load()), command.name
        assert any(line.strip().startswith(command.usage) for line in help_lines), command.name
    assert REGISTRY.completions() == [n for n in REGISTRY.names() if " " not in n]
    assert set(REGISTRY.names()) == set(COMMANDS)


@pytest.mark.parametrize(
    ("line", "name", "args"),
    [
        ("/fork diff", "fork diff", ()),
        ("/fork DIFF src/app.py", "fork diff", ("src/app.py",)),
        ("/fork", "fork", ()),
        ("/fork-budget aggregate 2", "fork-budget", ("aggregate", "2")),
    ],
)
def test_a_line_resolves_to_its_registered_command(
    line: str, name: str, args: tuple[str, ...]
) -> None:
    parsed = parse_input(line)
    assert isinstance(parsed, Slash)
    spec, command = resolve(parsed)
    assert spec.name == name and command == Slash(name, args)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/help me", "usage: /help (it takes no arguments)"),
        ("/merge now", "usage: /merge (it takes no arguments)"),
        ("/fork diff a b", "usage: /fork diff [PATH] (it takes at most 1 argument(s))"),
    ],
)
def test_malformed_commands_get_a_one_line_usage_error(line: str, message: str) -> None:
    parsed = parse_input(line)
    assert isinstance(parsed, Slash)
    with pytest.raises(CommandError) as caught:
        resolve(parsed)
    assert str(caught.value) == message


# ----------------------------------------------------------------------------- in the app


async def test_settings_commands_write_through_at_once(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await type_line(pilot, "/fork-branches 4")
        assert chat.last_notice == "fork_branch_count = 4"
        assert _config(project)["fork"]["branches"] == 4
        await submit(pilot, "/fork-budget per-branch 0.25")
        assert chat.last_notice == "per-branch budget = $0.25"
        await submit(pilot, "/fork-budget aggregate 2.00")
        assert chat.last_notice == "aggregate budget = $2.00"
        fork = _config(project)["fork"]
        assert fork["per_branch_budget_usd"] == 0.25 and fork["aggregate_budget_usd"] == 2.0
        await submit(pilot, "/fork-model 1 anthropic:claude-opus-4-6")
        assert chat.last_notice == "Branch 1 model = anthropic:claude-opus-4-6"
        await submit(pilot, "/fork-model 2 openrouter:openai/gpt-4.1")
        assert _config(project)["fork"]["models"] == {
            "1": "anthropic:claude-opus-4-6",
            "2": "openrouter:openai/gpt-4.1",
        }
        await submit(pilot, "/fork-model 1 clear")
        assert _config(project)["fork"]["models"] == {"2": "openrouter:openai/gpt-4.1"}
        await submit(pilot, "/fork-model clear")
        assert "models" not in _config(project)["fork"]
        await submit(pilot, "/fork-budget clear")
        assert _config(project)["fork"] == {"branches": 4}
        assert app.session.settings.fork_branch_count == 4
        await submit(pilot, "/fork-branches")
        assert chat.last_notice == "fork_branch_count = 4"


BAD_SETTINGS = [
    ("/fork-branches 0", "fork.branches: must be between 1 and"),
    ("/fork-branches 11", "between 1 and fork.max_branches (10), got 11"),
    ("/fork-branches many", "fork.branches: expected an integer"),
    ("/fork-budget per-branch -1", "must be greater than 0"),
    ("/fork-budget weekly 3", "unknown budget kind 'weekly'"),
    ("/fork-model 1 gpt4", "needs a provider prefix"),
    ("/fork-model 9 openai:gpt-6-luna", "between 1 and fork.branches (3)"),
    ("/frobnicate now", "unknown command /frobnicate"),
    ("/cost now", "usage: /cost (it takes no arguments)"),
    ("/fork diff a.txt b.txt", "no fork is open: /fork diff"),
]


async def test_bad_settings_are_refused_in_one_line_and_the_file_is_untouched(
    project: Path,
) -> None:
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir()
    config.write_text("# mine\n[fork]\nbranches = 3\n")
    before = config.read_bytes()
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        for line, expected in BAD_SETTINGS:
            await submit(pilot, line)
            assert expected in chat.last_notice, line
            assert "\n" not in chat.last_notice
            assert config.read_bytes() == before, line
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml"]


async def test_a_broken_config_is_reported_with_key_and_reason_and_left_alone(
    project: Path,
) -> None:
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir()
    config.write_text('[fork]\nbranches = "lots"\nmax_depth = 0\n[review]\nmerge_strategy = "x"\n')
    before = config.read_bytes()
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        text = "\n".join(chat.messages.transcript())
        assert "config.toml line 2: fork.branches: expected an integer, got 'lots'" in text
        assert "fork.max_depth: must be between 1 and 10, got 0" in text
        assert "review.merge_strategy: must be one of" in text
        assert "defaults are used" in text
        assert app.session.settings.fork_branch_count == 2  # the default
    assert config.read_bytes() == before


async def test_a_toml_syntax_error_is_reported_with_its_line(project: Path) -> None:
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir()
    config.write_text("[fork]\nbranches = = 3\n")
    before = config.read_bytes()
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        text = "\n".join(app.screen.messages.transcript())  # type: ignore[attr-defined]
        assert "config.toml line 2: TOML syntax error" in text
    assert config.read_bytes() == before


async def test_help_cost_tokens_version_copy(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        assert chat.input.commands == sorted(REGISTRY.completions())
        await submit(pilot, "/help")
        for usage in ("/fork-budget per-branch USD", "/merge", ">>label message", "ctrl+g"):
            assert usage in chat.last_notice
        await submit(pilot, "/copy")
        assert chat.last_notice == "nothing to copy yet"
        await parent_turn(pilot, "say hi")
        await submit(pilot, "/cost")
        assert chat.last_notice.startswith("chat: $0.0000 over 1 requests")
        await submit(pilot, "/tokens")
        totals = app.session.totals
        assert chat.last_notice == (
            f"chat: {totals.input_tokens:,} in / {totals.output_tokens:,} out"
        )
        await submit(pilot, "/version")
        assert chat.last_notice.startswith("forkdeck ") and "textual" in chat.last_notice
        await submit(pilot, "/copy")
        assert chat.last_notice.startswith("copied ")
        assert app.clipboard.startswith('offline model (no LLM) got "say hi"')


async def test_quit_leaves_the_app(project: Path) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await submit(pilot, "/quit")
        await wait_for(pilot, lambda: not app.is_running)
    assert app.return_code == 0
