"""Choosing a model: names from settings or the user, provider detection, display names.

Everything a branch's ``BranchSpec.model``, ``[fork.models]``, the picker's model column or
``--model`` can say ends up here, so the rules live in one place (:func:`resolve_model`):

* any pydantic-ai model string (``anthropic:...``, ``openai:...``, ``google:...``,
  ``groq:...``, ``openrouter:...``) is checked (known provider, SDK installed) and returned
  *as a string*; :func:`connect_model` builds it at once, so a missing API key is a
  ``ConfigError`` naming the variable (the TUI then starts offline and says so);
* the pre-2.x names ``google-gla:`` / ``google-vertex:`` are rewritten to ``google:`` /
  ``google-cloud:`` (pydantic-ai 2 renamed them), since users still type them;
* ``offline`` / ``offline:<variant>`` gives the scripted :class:`OfflineModel`;
* an OpenAI-compatible server (llama.cpp, vLLM, LM Studio, Ollama's ``/v1``):
  ``openai-compatible:NAME@URL``; a URL (the name from ``[model] default`` without its
  prefix, else the server's first ``/v1/models`` entry); ``openai:NAME`` or a bare name with
  ``[model] base_url`` / ``openai_base_url``; ``ollama:NAME`` with ``[model]
  ollama_base_url`` or ``OLLAMA_BASE_URL``. Built as an ``OpenAIChatModel`` whose profile
  makes a stream without ``finish_reason`` an error (a cut stream, see ``ServerModel``).

:func:`connect_model` wraps every real model in :class:`~branching_core.agent.server_model.
ServerModel` with the :class:`~branching_core.agent.model_config.ModelConfig` (limits, one slot
per server, cut-stream retry, usage estimates, readable errors); :func:`config_resolver` is
the coordinator's ``model_resolver`` with the same settings. A name that cannot work raises
:class:`~branching_core.errors.ConfigError` with a message that names the real setting.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model

from branching_core.agent.model_config import ModelConfig
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


def _is_url(name: str) -> bool:
    return name.startswith(("http://", "https://"))


def require_scheme(url: str, what: str = "base URL") -> str:
    """``url`` when it starts with ``http://``/``https://``; else a ``ConfigError`` that says
    what to write (``localhost:8000/v1`` used to be accepted unchecked and fail later)."""
    text = url.strip()
    if _is_url(text):
        return text
    hint = f"http://{text}" if text else "http://host:port/v1"
    raise ConfigError(
        f"{what} {text!r} has no scheme: write {hint}", key="model.base_url"
    )


def env_server(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """``OPENAI_BASE_URL`` (and ``OPENAI_API_KEY``) from the environment: the server the
    OpenAI client would reach anyway, so a default model is asked of it, never a made-up
    hosted name sent to a local server."""
    url = env.get("OPENAI_BASE_URL", "").strip()
    if not url:
        return None, None
    return url, env.get("OPENAI_API_KEY", "").strip() or None


PROVIDER_PREFIXES_COMPATIBLE = ("openai-compatible", "openai_compatible")


def _clean_name(name: str | None) -> str:
    """A model name as a server knows it: no ``provider:`` prefix, no ``@URL`` suffix."""
    if not name:
        return ""
    text = str(name).strip()
    if _is_url(text):
        return ""
    text = text.split("@", 1)[0]
    prefix, sep, rest = text.partition(":")
    if sep and (prefix in _KNOWN_PREFIXES or prefix in PROVIDER_PREFIXES_COMPATIBLE):
        return rest
    return text


_KNOWN_PREFIXES = frozenset(
    {"openai", "openai-chat", "anthropic", "ollama", "google", "groq", "mistral", "openrouter",
     "deepseek", "cohere", "xai", "vllm", "litellm", "together", "fireworks"}
)


def first_server_model(base_url: str, *, api_key: str | None = None, timeout: float = 5.0) -> str:
    """The first model a server lists at ``GET {base_url}/models`` (raises ``ConfigError``)."""
    from branching_core.agent.model_check import list_server_models

    names, problem = list_server_models(base_url, api_key=api_key, timeout=timeout)
    if names:
        return names[0]
    raise ConfigError(
        f"a model name is needed for the server at {base_url}: set [model] default, or use "
        f"openai-compatible:NAME@{base_url} ({problem or 'the server lists no model'})",
        key="model.default",
    )


def openai_compatible_model(base_url: str, model_name: str, *, api_key: str | None = None) -> Model:
    """An OpenAI-compatible server (vLLM, llama.cpp, LM Studio, Ollama /v1) at ``base_url``.

    No request is made. The profile makes a stream that ends without ``finish_reason`` an
    error (a cut stream, see ``ServerModel``) instead of a silently complete answer.
    """
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    if not model_name:
        raise ConfigError(
            f"a model name is needed for the server at {base_url}: set [model] default",
            key="model.default",
        )
    base_url = require_scheme(base_url)
    # Local servers usually ignore the key, but the OpenAI client insists on one.
    provider = OpenAIProvider(base_url=base_url, api_key=api_key or "not-needed")
    return OpenAIChatModel(model_name, provider=provider, profile=_CUT_IS_ERROR)


_CUT_IS_ERROR: Any = {"openai_chat_streaming_requires_finish_reason": True}


def _ollama_url(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"


def ollama_model(base_url: str, model_name: str) -> Model:
    """pydantic-ai's Ollama model on ``base_url`` (its OpenAI-compatible ``/v1``)."""
    from pydantic_ai.models.ollama import OllamaModel
    from pydantic_ai.providers.ollama import OllamaProvider

    provider = OllamaProvider(base_url=_ollama_url(base_url))
    return OllamaModel(model_name, provider=provider, profile=_CUT_IS_ERROR)


def _check_provider(name: str) -> str:
    from pydantic_ai.models import parse_model_id
    from pydantic_ai.providers import infer_provider_class

    provider, model_name = parse_model_id(name)
    if provider is None:
        raise ConfigError(
            f"model {name!r} has no provider prefix and no server is configured: use e.g. "
            "'anthropic:claude-haiku-5-5', 'openai:gpt-6-luna', 'offline', or point it at an "
            "OpenAI-compatible server with [model] base_url (or --base-url, or "
            f"openai-compatible:{name}@http://host:port/v1)",
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


def _config(settings: Mapping[str, Any] | object | None) -> ModelConfig:
    if isinstance(settings, ModelConfig):
        return settings
    return ModelConfig.from_settings(settings)


def resolve_model(
    name: str | Model | None,
    *,
    settings: Mapping[str, Any] | object | None = None,
    env: Mapping[str, str] | None = None,
) -> Model | str:
    """Turn a model choice into something ``Agent(model=...)`` accepts.

    ``settings``: a :class:`ModelConfig`, the config ``Settings``, or a mapping/object with
    ``model`` (``[model] default``), ``base_url``, ``openai_base_url``, ``ollama_base_url``,
    ``api_key``. Rules, in order:

    * a :class:`Model` instance as is; no name: ``[model] default``, else (with a server
      URL) the server's first model, else :func:`default_model`;
    * ``offline[:variant]``;
    * ``openai-compatible:NAME@URL``, or ``openai-compatible:NAME`` with a base URL;
    * a URL: that server, with ``[model] default`` cleaned of its prefix as the name (or
      the server's first model);
    * ``openai:NAME`` or a bare name while ``[model] base_url`` / ``openai_base_url`` is set:
      that server;
    * ``ollama:NAME``: ``[model] ollama_base_url`` or ``OLLAMA_BASE_URL`` (a ``base_url``
      also works);
    * any other ``provider:model`` string is validated and returned as a string (the provider
      is built when the agent runs; :func:`connect_model` builds it now and checks the key).
    """
    if isinstance(name, Model):
        return name
    config = _config(settings)
    env = os.environ if env is None else env
    server = config.server_url
    api_key = config.api_key
    if not server:
        server, env_key = env_server(env)
        api_key = api_key or env_key
    if server:
        require_scheme(server)
    if name is None or not str(name).strip():
        name = config.default
        if not name and server:
            name = first_server_model(server, api_key=api_key)
            return openai_compatible_model(server, name, api_key=api_key)
        name = name or default_model(env)
    name = str(name).strip()
    if is_offline_name(name):
        try:
            return offline_model(name)
        except ValueError as exc:
            raise ConfigError(str(exc), key="model") from None
    if _is_url(name):
        model_name = _clean_name(config.default) or first_server_model(name, api_key=api_key)
        return openai_compatible_model(name, model_name, api_key=api_key)
    prefix, sep, rest = name.partition(":")
    if sep and prefix in PROVIDER_PREFIXES_COMPATIBLE:
        model_name, at, url = rest.partition("@")
        url = url.strip() if at else (server or "")
        if not url:
            raise ConfigError(
                f"{name!r} needs a server: write openai-compatible:{model_name}@http://host:port/v1"
                " or set [model] base_url",
                key="model",
            )
        return openai_compatible_model(url, model_name.strip(), api_key=api_key)
    known = sep and prefix in _KNOWN_PREFIXES | set(PROVIDER_ALIASES)
    if not known and "@" in name:
        model_name, _, url = name.partition("@")
        if _is_url(url.strip()):
            return openai_compatible_model(url.strip(), model_name.strip(), api_key=api_key)
    if prefix == "ollama" and sep:
        url = config.ollama_base_url or env.get("OLLAMA_BASE_URL", "").strip()
        if config.base_url and not config.ollama_base_url:
            return openai_compatible_model(config.base_url, rest, api_key=api_key)
        if not url:
            raise ConfigError(
                f"{name!r} needs the Ollama server address: set [model] ollama_base_url or "
                "OLLAMA_BASE_URL (e.g. http://localhost:11434/v1)",
                key="model",
            )
        return ollama_model(url, rest)
    if server and (prefix in ("openai", "openai-chat") and sep):
        return openai_compatible_model(server, rest, api_key=api_key)
    if server and not known:
        return openai_compatible_model(server, name, api_key=api_key)
    return _check_provider(name)


def _needed_key(provider: str) -> tuple[str, ...]:
    for spec in _PROVIDERS:
        if spec.name == provider:
            return spec.env_vars
    return ()


def connect_model(
    name: str | Model | None,
    config: ModelConfig | Mapping[str, Any] | object | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> Model:
    """A ready :class:`Model` for ``name``: resolved with ``config``, provider built now (so a
    missing API key is a ``ConfigError`` naming the variable, not a failure at the first
    request), and wrapped in :class:`ServerModel` (limits, one slot, cut streams, usage).

    The offline model and pydantic-ai's test/function models are returned unwrapped.
    """
    from pydantic_ai.models import infer_model

    from branching_core.agent.server_model import ServerModel

    cfg = _config(config)
    env = os.environ if env is None else env
    resolved = resolve_model(name, settings=cfg, env=env)
    if isinstance(resolved, str):
        provider = resolved.partition(":")[0]
        keys = _needed_key(provider)
        if keys and not any(env.get(k, "").strip() for k in keys):
            raise ConfigError(
                f"{resolved} needs the {' or '.join(keys)} environment variable (not set); "
                "set it, or use a local server (see docs/models.md, \"Real models\")",
                key="model",
            )
        try:
            resolved = infer_model(resolved)
        except Exception as exc:  # pydantic-ai's UserError names what is missing
            raise ConfigError(f"{resolved}: {exc}", key="model") from None
    if isinstance(resolved, ServerModel) or _is_local(resolved):
        return resolved
    return ServerModel(resolved, cfg)


def _is_local(model: Model) -> bool:
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.test import TestModel

    return isinstance(model, OfflineModel | FunctionModel | TestModel)


def connect_or_offline(
    name: str | Model | None,
    config: ModelConfig | Mapping[str, Any] | object | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> tuple[Model, str | None]:
    """:func:`connect_model`, or the offline model and the one-line reason it could not be used.

    The TUI never waits on a model it cannot use: it starts with the offline model and says why.
    """
    try:
        return connect_model(name, config, env=env), None
    except ConfigError as exc:
        return offline_model(OFFLINE), str(exc)


def config_resolver(
    config: ModelConfig | Mapping[str, Any] | object | None, *, env: Mapping[str, str] | None = None
) -> Callable[[str], Model]:
    """A coordinator ``model_resolver``: per-branch names (``[fork.models]``, the picker,
    ``BranchSpec.model``) reach the configured server with the configured limits."""
    cfg = _config(config)

    def resolve(name: str) -> Model:
        return connect_model(name, cfg, env=env)

    return resolve


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
    if model.system in ("openai", "ollama") and base_url and "api.openai.com" not in str(base_url):
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
    "config_resolver",
    "connect_model",
    "connect_or_offline",
    "default_model",
    "detect_providers",
    "display_name",
    "env_server",
    "first_server_model",
    "is_offline",
    "openai_compatible_model",
    "require_scheme",
    "resolve_model",
    "response_cost_usd",
]
