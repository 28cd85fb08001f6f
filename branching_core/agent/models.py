"""Choosing a model: names from settings or the user, provider detection, display names.

Everything a branch's ``BranchSpec.model`` or a ``/fork-model`` command can say ends up
here, so the rules live in one place:

* any pydantic-ai model string (``anthropic:...``, ``openai:...``, ``google:...``,
  ``groq:...``, ``openrouter:...``, ``ollama:...``) is checked (known provider, SDK
  installed) and returned *as a string*: pydantic-ai builds the provider when the agent
  first runs, so choosing a model never needs the API key or the network;
* the pre-2.x names ``google-gla:`` / ``google-vertex:`` are rewritten to ``google:`` /
  ``google-cloud:`` (pydantic-ai 2 renamed them), since users still type them;
* ``offline`` / ``offline:<variant>`` gives the scripted :class:`OfflineModel`;
* an OpenAI-compatible server (Ollama, vLLM, LM Studio, ...) comes from a base URL: a name
  that is itself a URL, or settings ``{"base_url": ..., "model": ...}``; it is built as an
  ``OpenAIChatModel`` with an ``OpenAIProvider(base_url=...)`` (construction makes no request).

A name that cannot work raises :class:`~branching_core.errors.ConfigError` with
``key='model'`` and a message that says what to do.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model

from branching_core.agent.offline import OfflineModel, is_offline_name, offline_model
from branching_core.errors import ConfigError

OFFLINE = "offline"
OFFLINE_DISPLAY_SUFFIX = "(scripted, no LLM)"
PROVIDER_ALIASES: dict[str, str] = {"google-gla": "google", "google-vertex": "google-cloud"}


@dataclass(frozen=True)
class ProviderInfo:
    """A provider configured in the environment."""

    name: str
    """The pydantic-ai provider prefix (``anthropic``, ``google``, ``ollama``...)."""
    label: str
    """Human name for menus."""
    env_var: str
    """The environment variable that revealed it."""
    default_model: str
    """A cheap, capable model string for this provider."""
    installed: bool
    """Whether the provider's SDK is importable (``False``: needs a pydantic-ai-slim extra)."""
    base_url: str | None = None


@dataclass(frozen=True)
class _ProviderSpec:
    name: str
    label: str
    env_vars: tuple[str, ...]
    default_model: str
    sdk_module: str


# Order matters: default_model() picks the first detected, installed provider.
_PROVIDERS: tuple[_ProviderSpec, ...] = (
    _ProviderSpec(
        "anthropic", "Anthropic", ("ANTHROPIC_API_KEY",), "anthropic:claude-haiku-5-5", "anthropic"
    ),
    _ProviderSpec("openai", "OpenAI", ("OPENAI_API_KEY",), "openai:gpt-6-luna", "openai"),
    _ProviderSpec(
        "google",
        "Google",
        ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
        "google:gemini-3.1-flash-lite",
        "google.genai",
    ),
    _ProviderSpec("groq", "Groq", ("GROQ_API_KEY",), "groq:openai/gpt-oss-20b", "groq"),
    _ProviderSpec(
        "mistral", "Mistral", ("MISTRAL_API_KEY",), "mistral:mistral-small-latest", "mistralai"
    ),
    _ProviderSpec(
        "openrouter",
        "OpenRouter",
        ("OPENROUTER_API_KEY",),
        "openrouter:openai/gpt-4.1-mini",
        "openai",
    ),
    _ProviderSpec(
        "deepseek", "DeepSeek", ("DEEPSEEK_API_KEY",), "deepseek:deepseek-flash", "openai"
    ),
    _ProviderSpec("cohere", "Cohere", ("CO_API_KEY",), "cohere:command-r7b-12-2024", "cohere"),
    _ProviderSpec("xai", "xAI", ("XAI_API_KEY",), "xai:grok-3-mini", "xai_sdk"),
)
OLLAMA_DEFAULT_MODEL = "llama3.2"


def _sdk_installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def detect_providers(env: Mapping[str, str] | None = None) -> list[ProviderInfo]:
    """The providers whose credentials (or, for Ollama, ``OLLAMA_BASE_URL``) are set in ``env``.

    Reads only the mapping (``os.environ`` by default): no network, no key validation.
    """
    env = os.environ if env is None else env
    found: list[ProviderInfo] = []
    for spec in _PROVIDERS:
        var = next((v for v in spec.env_vars if env.get(v, "").strip()), None)
        if var is not None:
            installed = _sdk_installed(spec.sdk_module)
            found.append(ProviderInfo(spec.name, spec.label, var, spec.default_model, installed))
    base_url = env.get("OLLAMA_BASE_URL", "").strip()
    if base_url:
        model = env.get("OLLAMA_MODEL", "").strip() or OLLAMA_DEFAULT_MODEL
        found.append(
            ProviderInfo(
                "ollama",
                "Ollama",
                "OLLAMA_BASE_URL",
                f"ollama:{model}",
                _sdk_installed("openai"),
                base_url,
            )
        )
    return found


def default_model(env: Mapping[str, str] | None = None) -> str:
    """A sensible cheap model of the first usable detected provider, else ``"offline"``."""
    for info in detect_providers(env):
        if info.installed:
            return info.default_model
    return OFFLINE


def _setting(settings: Mapping[str, Any] | object | None, key: str) -> Any:
    """Read ``key`` from a mapping or an attribute-style settings object."""
    if settings is None:
        return None
    if isinstance(settings, Mapping):
        return settings.get(key)
    return getattr(settings, key, None)


def _is_url(name: str) -> bool:
    return name.startswith(("http://", "https://"))


def openai_compatible_model(base_url: str, model_name: str, *, api_key: str | None = None) -> Model:
    """An OpenAI-compatible server (Ollama, vLLM, ...) at ``base_url``; no request is made."""
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    if not model_name:
        raise ConfigError(
            f"a model name is needed for the server at {base_url} (settings 'model')", key="model"
        )
    # Local servers usually ignore the key, but the OpenAI client insists on one.
    provider = OpenAIProvider(base_url=base_url, api_key=api_key or "not-needed")
    return OpenAIChatModel(model_name, provider=provider)


def _check_provider(name: str) -> str:
    from pydantic_ai.models import parse_model_id
    from pydantic_ai.providers import infer_provider_class

    provider, model_name = parse_model_id(name)
    if provider is None:
        raise ConfigError(
            f"model {name!r} has no provider prefix; use e.g. 'anthropic:claude-haiku-5-5', "
            "'openai:gpt-6-luna', 'offline', or set a base_url for an OpenAI-compatible server",
            key="model",
        )
    provider = PROVIDER_ALIASES.get(provider, provider)
    if not model_name:
        raise ConfigError(f"model {name!r} names no model after {provider!r}:", key="model")
    try:
        infer_provider_class(provider)
    except ValueError:
        raise ConfigError(f"unknown model provider {provider!r} in {name!r}", key="model") from None
    except ImportError as exc:
        raise ConfigError(f"model {name!r} cannot be used here: {exc}", key="model") from None
    return f"{provider}:{model_name}"


def resolve_model(
    name: str | Model | None,
    *,
    settings: Mapping[str, Any] | object | None = None,
    env: Mapping[str, str] | None = None,
) -> Model | str:
    """Turn a model choice into something ``Agent(model=...)`` accepts.

    ``settings`` may hold ``model``, ``base_url`` and ``api_key`` (a mapping or an object with
    those attributes). Precedence: a :class:`Model` instance as is; ``None`` falls back to
    settings ``model``, then :func:`default_model`; ``offline[:variant]``; a URL, or a name
    without provider prefix while settings give a ``base_url``, is an OpenAI-compatible
    server; ``ollama:NAME`` with a settings ``base_url`` uses that server; any other
    ``provider:model`` string is validated and returned unchanged (aliases rewritten).
    """
    if isinstance(name, Model):
        return name
    base_url = _setting(settings, "base_url")
    api_key = _setting(settings, "api_key")
    if name is None or not str(name).strip():
        name = _setting(settings, "model")
        if not name and base_url:
            raise ConfigError(
                f"settings give base_url {base_url} but no 'model' to use", key="model"
            )
        name = name or default_model(env)
    name = str(name).strip()
    if is_offline_name(name):
        try:
            return offline_model(name)
        except ValueError as exc:
            raise ConfigError(str(exc), key="model") from None
    if _is_url(name):
        return openai_compatible_model(name, _setting(settings, "model") or "", api_key=api_key)
    prefix, _, rest = name.partition(":")
    if base_url and (not rest or prefix in ("openai-compatible", "ollama")):
        return openai_compatible_model(base_url, rest if rest else name, api_key=api_key)
    if (
        prefix == "ollama"
        and rest
        and not (env if env is not None else os.environ).get("OLLAMA_BASE_URL")
    ):
        raise ConfigError(
            f"{name!r} needs the Ollama server address: set OLLAMA_BASE_URL (e.g. "
            "http://localhost:11434/v1) or settings base_url",
            key="model",
        )
    return _check_provider(name)


def is_offline(model: Model | str | None) -> bool:
    """Whether ``model`` is the scripted offline model (by instance or by name)."""
    if isinstance(model, OfflineModel):
        return True
    return isinstance(model, str) and is_offline_name(model)


def display_name(model: Model | str | None) -> str:
    """How a model is shown wherever a model name appears; the offline model says it is offline."""
    if model is None:
        return "(default model)"
    if isinstance(model, OfflineModel):
        return f"{model.model_name} {OFFLINE_DISPLAY_SUFFIX}"
    if isinstance(model, str):
        if is_offline_name(model):
            return f"{model} {OFFLINE_DISPLAY_SUFFIX}"
        return model
    base_url = getattr(getattr(model, "provider", None), "base_url", None)
    if model.system == "openai" and base_url and "api.openai.com" not in str(base_url):
        return f"{model.model_name} @ {str(base_url).rstrip('/')}"
    return f"{model.system}:{model.model_name}"


def response_cost_usd(response: ModelResponse) -> float | None:
    """The price of one response in USD: ``0.0`` for the offline model, ``None`` if unknown.

    Budgets are checked after every model response; a model genai-prices does not know must
    not crash that check, so unknown prices come back as ``None`` for the caller to decide.
    """
    if response.model_name and is_offline_name(response.model_name):
        return 0.0
    try:
        return float(response.cost().total_price)
    except (LookupError, ValueError, AssertionError):
        return None


__all__ = [
    "OFFLINE",
    "ProviderInfo",
    "default_model",
    "detect_providers",
    "display_name",
    "is_offline",
    "openai_compatible_model",
    "resolve_model",
    "response_cost_usd",
]
