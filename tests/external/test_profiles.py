"""Agent profiles: placeholders fill one argument each, the environment is filtered to what
the profile names, ``[agents.<name>]`` overrides only the keys it sets."""

from __future__ import annotations

import pytest

from branching_core.config.schema import AgentProfileSettings
from branching_core.external import BUILTIN, ProfileError, resolve_profile


def test_the_prompt_is_one_argument_never_a_shell() -> None:
    profile = resolve_profile("cmd:my-agent --task {prompt} --x")
    prompt = "fix it; rm -rf / $(reboot) 'quoted' \"too\""
    assert profile.argv(prompt) == ["my-agent", "--task", prompt, "--x"]
    assert not profile.prompt_on_stdin
    assert resolve_profile("cmd:my-agent").prompt_on_stdin


def test_resume_fills_the_session_and_refuses_without_a_resume_command() -> None:
    argv = BUILTIN["claude"].argv("go on", session="abc-123")
    assert argv[:2] == ["claude", "-p"] and "--fork-session" in argv
    assert argv[argv.index("--resume") + 1] == "abc-123" and argv[2] == "go on"
    with pytest.raises(ProfileError, match="cannot resume"):
        BUILTIN["aider"].argv("x", session="abc")


def test_environment_has_only_base_and_named_variables() -> None:
    source = {"PATH": "/bin", "HOME": "/h", "LANG": "C", "LC_ALL": "C",
              "ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o", "AWS_SECRET_ACCESS_KEY": "s",
              "GITHUB_TOKEN": "g", "CLAUDE_CODE_X": "1"}
    claude = BUILTIN["claude"].environment(source)
    assert claude == {"PATH": "/bin", "HOME": "/h", "LANG": "C", "LC_ALL": "C",
                      "ANTHROPIC_API_KEY": "a", "CLAUDE_CODE_X": "1"}
    codex = BUILTIN["codex"].environment(source)
    assert "OPENAI_API_KEY" in codex and "ANTHROPIC_API_KEY" not in codex
    assert "GITHUB_TOKEN" not in resolve_profile("cmd:x").environment(source)


def test_config_overrides_only_what_it_sets_and_defines_new_profiles() -> None:
    configured = {
        "claude": AgentProfileSettings(timeout_s=30.0, env=("ANTHROPIC_*", "X=1")),
        "mine": AgentProfileSettings(command="mine --go {prompt}",
                                     expose=(("~/.mine", True, True),), steer=True),
    }
    claude = resolve_profile("claude", configured)
    assert claude.command == BUILTIN["claude"].command and claude.timeout_s == 30.0
    assert claude.environment({"X": "0", "ANTHROPIC_API_KEY": "a"}) == {
        "X": "1", "ANTHROPIC_API_KEY": "a"}
    mine = resolve_profile("mine", configured)
    assert mine.argv("p") == ["mine", "--go", "p"]
    assert [(e.path, e.writable) for e in mine.expose] == [("~/.mine", True)]
    with pytest.raises(ProfileError, match="unknown agent 'other'"):
        resolve_profile("other", configured)
    with pytest.raises(ProfileError, match="needs a command"):
        resolve_profile("new", {"new": AgentProfileSettings(timeout_s=1.0)})


def test_fork_rows_name_a_session_to_fork() -> None:
    from branching_core.external.profiles import resolve_row

    profile, session = resolve_row("claude@4f0c-11aa")
    assert profile.name == "claude" and session == "4f0c-11aa"
    assert resolve_row("cmd:npx agent@1.2 {prompt}")[1] is None  # commands are never split
    with pytest.raises(ProfileError, match="cannot fork a session"):
        resolve_row("aider@abc")
    with pytest.raises(ProfileError, match="session after @"):
        resolve_row("claude@")


def test_config_expose_creates_only_directories_marked_with_a_slash(tmp_path) -> None:
    from pathlib import Path

    from branching_core.config import load_settings

    (tmp_path / ".pydantic-deep").mkdir()
    (tmp_path / ".pydantic-deep" / "config.toml").write_text(
        '[agents.mine]\ncommand = "mine {prompt}"\n'
        'expose = ["~/.mine/:rw", "~/.mine.json:rw", "~/.other"]\n')
    settings = load_settings(Path(tmp_path)).settings
    profile = resolve_profile("mine", settings.agents)
    home = tmp_path / "home"
    home.mkdir()
    paths = profile.exposed_paths(str(home))
    assert paths == [(str(home / ".mine"), True), (str(home / ".mine.json"), True),
                     (str(home / ".other"), False)]
    assert (home / ".mine").is_dir()
    assert not (home / ".mine.json").exists() and not (home / ".other").exists()
