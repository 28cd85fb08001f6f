"""Model selection: strings, offline, base URLs, provider detection. No network anywhere."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.models.openai import OpenAIChatModel

from branching_core.agent import (
    OfflineModel,
    ProviderInfo,
    default_model,
    detect_providers,
    display_name,
    is_offline,
    resolve_model,
)
from branching_core.errors import ConfigError

NO_KEYS: dict[str, str] = {}


def test_detect_providers_on_a_fake_env() -> None:
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-x",
        "GEMINI_API_KEY": "g",
        "OPENROUTER_API_KEY": "or",
        "OLLAMA_BASE_URL": "http://localhost:11434/v1",
        "OLLAMA_MODEL": "qwen3",
        "OPENAI_API_KEY": "  ",  # blank: not configured
        "UNRELATED": "1",
    }
    found = detect_providers(env)
    assert [p.name for p in found] == ["anthropic", "google", "openrouter", "ollama"]
    google = found[1]
    assert google.env_var == "GEMINI_API_KEY" and google.default_model.startswith("google:")
    ollama = found[-1]
    assert ollama == ProviderInfo(
        "ollama", "Ollama", "OLLAMA_BASE_URL", "ollama:qwen3", True, "http://localhost:11434/v1"
    )
    assert found[0].installed  # the anthropic SDK is installed here


def test_detect_providers_empty_env() -> None:
    assert detect_providers(NO_KEYS) == []
    assert default_model(NO_KEYS) == "offline"


def test_default_model_picks_the_first_usable_provider() -> None:
    assert default_model({"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}).startswith("anthropic:")
    assert default_model({"OPENAI_API_KEY": "k"}).startswith("openai:")
    # Google's SDK is not installed here: skipped rather than chosen and failing later
    env = {"GOOGLE_API_KEY": "k", "GROQ_API_KEY": "k"}
    usable = [p for p in detect_providers(env) if p.installed]
    assert default_model(env) == (usable[0].default_model if usable else "offline")


def test_resolve_model_strings_stay_strings() -> None:
    assert resolve_model("anthropic:claude-haiku-5-5") == "anthropic:claude-haiku-5-5"
    assert resolve_model("openai:gpt-6-luna") == "openai:gpt-6-luna"
    assert resolve_model("openrouter:openai/gpt-4.1-mini") == "openrouter:openai/gpt-4.1-mini"


def test_resolve_model_rewrites_old_google_names() -> None:
    try:
        assert resolve_model("google-gla:gemini-3.1-flash-lite") == "google:gemini-3.1-flash-lite"
    except ConfigError as exc:  # the google extra is not installed here
        assert "google" in str(exc) and exc.key == "model"


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("gpt-6-luna", "no provider prefix"),
        ("nosuchprovider:model", "unknown model provider"),
        ("anthropic:", "names no model"),
        ("offline:bogus", "unknown offline variant"),
        ("ollama:llama3", "OLLAMA_BASE_URL"),
    ],
)
def test_resolve_model_rejects_bad_names(name: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        resolve_model(name, env=NO_KEYS)
    assert info.value.key == "model"


def test_resolve_offline() -> None:
    assert resolve_model("offline") == OfflineModel()
    slow = resolve_model("offline:slow")
    assert isinstance(slow, OfflineModel) and slow.variant == "slow"
    assert is_offline(slow) and is_offline("offline") and not is_offline("openai:gpt-6-luna")


def test_resolve_none_uses_settings_then_environment() -> None:
    assert (
        resolve_model(None, settings={"model": "anthropic:claude-haiku-5-5"})
        == "anthropic:claude-haiku-5-5"
    )
    assert resolve_model(None, env=NO_KEYS) == OfflineModel()
    assert resolve_model(None, env={"ANTHROPIC_API_KEY": "k"}) == "anthropic:claude-haiku-5-5"


def test_resolve_base_url_from_settings_builds_an_openai_compatible_model() -> None:
    model = resolve_model(
        None, settings={"base_url": "http://localhost:11434/v1", "model": "llama3"}
    )
    assert isinstance(model, OpenAIChatModel)
    assert model.model_name == "llama3"
    assert model.provider is not None
    assert str(model.provider.base_url).startswith("http://localhost:11434/v1")
    assert display_name(model) == "llama3 @ http://localhost:11434/v1"
    # a bare or ollama-prefixed name with a configured base URL goes to that server too
    for name in ("llama3", "ollama:llama3", "openai-compatible:llama3"):
        same = resolve_model(name, settings={"base_url": "http://localhost:11434/v1"})
        assert isinstance(same, OpenAIChatModel) and same.model_name == "llama3"


def test_resolve_url_name_with_settings_model() -> None:
    class Settings:  # attribute-style settings objects work as well as mappings
        model = "qwen2.5-coder"
        api_key = "secret"

    model = resolve_model("http://gpu-box:8000/v1", settings=Settings())
    assert isinstance(model, OpenAIChatModel) and model.model_name == "qwen2.5-coder"
    # No name anywhere: the server is asked for its models; one that does not answer (a closed
    # loopback port here) gives an error naming the real key, [model] default.
    with pytest.raises(ConfigError, match=r"model name is needed.*\[model\] default"):
        resolve_model("http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match=r"\[model\] default") as info:
        resolve_model(None, settings={"base_url": "http://127.0.0.1:9/v1"})
    assert info.value.key == "model.default"


def test_model_instances_pass_through_and_work_in_an_agent() -> None:
    model = OfflineModel()
    assert resolve_model(model) is model
    resolved = resolve_model("offline")
    assert isinstance(resolved, Model)
    assert Agent(resolved).run_sync("ping").output.startswith('offline model (no LLM) got "ping"')


def test_display_names() -> None:
    assert display_name("offline") == "offline (scripted, no LLM)"
    assert display_name("offline:echo") == "offline:echo (scripted, no LLM)"
    assert display_name("anthropic:claude-haiku-5-5") == "anthropic:claude-haiku-5-5"
    assert display_name(None) == "(default model)"
