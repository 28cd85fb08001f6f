"""What the user configured about models, in one typed value: ``[model]``, ``[fork.prices]``, flags.

Why a value of its own: the TUI's model, every branch's ``BranchSpec.model`` (``[fork.models]``,
the picker's model column), judges and ``forkdeck models`` must all reach the *same* server
with the *same* request limits. Passing this one object to :func:`connect_model` everywhere
is what makes that true (per-branch names used to be resolved without the settings, so they
could never reach a configured server).

Built from :class:`branching_core.config.Settings` (or any object/mapping with the same
attribute names) by :meth:`ModelConfig.from_settings`; CLI flags override with
:meth:`ModelConfig.with_overrides`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from branching_core.errors import InvalidArgumentError

#: Defaults for the request limits (``[model] max_tokens`` / ``request_timeout`` /
#: ``first_token_timeout``). Generous for a slow local CPU model, finite so a server that never
#: answers or a response that never ends cannot hold a branch (or a single-slot server) forever.
DEFAULT_MAX_TOKENS = 4096
DEFAULT_REQUEST_TIMEOUT_S = 300.0
DEFAULT_FIRST_TOKEN_TIMEOUT_S = 120.0
#: Tokens (input + output) a branch may use when it has a USD budget but its model has no known
#: price (``[fork] token_cap``): a budget is never silently off.
DEFAULT_TOKEN_CAP = 200_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens, input and output (``[fork.prices]`` or ``--price IN/OUT``)."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6

    @classmethod
    def parse(cls, text: str) -> Price:
        """``"0.5/1.5"`` (input/output USD per Mtok); one number means both."""
        parts = [p.strip() for p in str(text).replace(",", "/").split("/") if p.strip()]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) == 1:
            values = values * 2
        if len(values) != 2 or any(v < 0 for v in values):
            raise InvalidArgumentError(
                f"price {text!r}: expected IN/OUT in USD per million tokens, e.g. 0.5/1.5"
            )
        return cls(values[0], values[1])


@dataclass(frozen=True)
class ModelConfig:
    """Everything about reaching and limiting a model (see the module docstring)."""

    default: str | None = None
    """``[model] default``: the model name used when none is given."""
    base_url: str | None = None
    """``[model] base_url`` / ``--base-url``: an OpenAI-compatible server for every name."""
    openai_base_url: str | None = None
    """``[model] openai_base_url``: where ``openai:NAME`` and bare names go."""
    ollama_base_url: str | None = None
    """``[model] ollama_base_url``: where ``ollama:NAME`` goes (its OpenAI-compatible ``/v1``)."""
    api_key: str | None = None
    """The key sent to OpenAI-compatible servers (vLLM ``--api-key``, a gateway): read from
    the environment variable ``[model] api_key_env`` names, else ``FORKDECK_API_KEY``; the key
    itself never goes into ``config.toml``, which is meant to be committed."""
    max_tokens: int | None = DEFAULT_MAX_TOKENS
    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT_S
    first_token_timeout: float | None = DEFAULT_FIRST_TOKEN_TIMEOUT_S
    max_concurrent_requests: int | None = None
    """``[model] max_concurrent_requests``: requests in flight at once to one server (None:
    unlimited). 1 makes a single-slot local server work with forks."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """``[fork.prices]``: model name -> price, for models genai-prices does not know."""
    price_override: Price | None = None
    """``--price``: one price for every model."""
    token_cap: int = DEFAULT_TOKEN_CAP

    @property
    def server_url(self) -> str | None:
        """The OpenAI-compatible server bare names go to (``base_url``, else
        ``openai_base_url``)."""
        return self.base_url or self.openai_base_url

    @classmethod
    def from_settings(cls, settings: Any, env: Mapping[str, str] | None = None) -> ModelConfig:
        """From ``Settings`` (or a mapping / object with the same names); absent keys: defaults.
        ``env`` (default ``os.environ``) holds the server's API key (see ``api_key``)."""

        def get(name: str, default: Any = None) -> Any:
            if settings is None:
                return default
            if isinstance(settings, Mapping):
                value = settings.get(name, default)
            else:
                value = getattr(settings, name, default)
            return default if value is None else value

        raw_prices = get("model_prices", {}) or {}
        prices: dict[str, Price] = {}
        for name, value in dict(raw_prices).items():
            if isinstance(value, Price):
                prices[str(name)] = value
            elif isinstance(value, Mapping):
                prices[str(name)] = Price(float(value["input"]), float(value["output"]))
            elif isinstance(value, list | tuple) and len(value) == 2:
                prices[str(name)] = Price(float(value[0]), float(value[1]))
        return cls(
            default=get("model") or get("default"),
            base_url=get("model_base_url") or get("base_url"),
            openai_base_url=get("openai_base_url"),
            ollama_base_url=get("ollama_base_url"),
            api_key=get("api_key") or _env_key(get("api_key_env"), env),
            max_tokens=get("max_tokens", DEFAULT_MAX_TOKENS),
            request_timeout=get("request_timeout", DEFAULT_REQUEST_TIMEOUT_S),
            first_token_timeout=get("first_token_timeout", DEFAULT_FIRST_TOKEN_TIMEOUT_S),
            max_concurrent_requests=get("max_concurrent_requests"),
            prices=prices,
            token_cap=int(get("token_cap", DEFAULT_TOKEN_CAP)),
        )

    def with_overrides(
        self,
        *,
        base_url: str | None = None,
        price: Price | str | None = None,
        max_concurrent_requests: int | None = None,
    ) -> ModelConfig:
        """This config with the CLI flags that were given (``None`` keeps the setting)."""
        changes: dict[str, Any] = {}
        if base_url:
            changes["base_url"] = base_url
        if price is not None:
            changes["price_override"] = price if isinstance(price, Price) else Price.parse(price)
        if max_concurrent_requests is not None:
            changes["max_concurrent_requests"] = max_concurrent_requests
        return replace(self, **changes) if changes else self

    def price_for(self, model_name: str | None) -> Price | None:
        """The user-set price for ``model_name`` (``--price`` first, then ``[fork.prices]``,
        by full name then by the name after its ``provider:`` prefix or before ``@``)."""
        if self.price_override is not None:
            return self.price_override
        if not model_name:
            return None
        candidates = [model_name]
        bare = model_name.split("@", 1)[0]
        candidates.append(bare)
        if ":" in bare:
            candidates.append(bare.split(":", 1)[1])
        for name in candidates:
            if name in self.prices:
                return self.prices[name]
        return None


__all__ = [
    "DEFAULT_FIRST_TOKEN_TIMEOUT_S",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "DEFAULT_TOKEN_CAP",
    "ModelConfig",
    "Price",
]


API_KEY_ENV = "FORKDECK_API_KEY"


def _env_key(name: str | None, env: Mapping[str, str] | None) -> str | None:
    """The API key from the environment: the variable ``name``, else ``FORKDECK_API_KEY``."""
    environ = os.environ if env is None else env
    return environ.get(name or API_KEY_ENV) or None
