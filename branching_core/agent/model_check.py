"""``forkdeck models``: what is configured, which keys are set, and whether the server answers.

Why a module apart from the CLI: the same check answers the TUI's questions later, and it must
stay importable without pydantic-ai (it only reads settings and the environment, and asks
``GET {base_url}/models`` with the standard library, with a short timeout).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from branching_core.agent.model_config import ModelConfig

#: Environment variables a model can come from (hosted providers by key; Ollama by URL).
ENV_KEYS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "CO_API_KEY",
    "XAI_API_KEY",
    "OLLAMA_BASE_URL",
)


def list_server_models(
    base_url: str, *, api_key: str | None = None, timeout: float = 5.0
) -> tuple[list[str], str | None]:
    """The model ids at ``GET {base_url}/models`` and ``None``, or ``[]`` and what went wrong."""
    url = base_url.rstrip("/") + "/models"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    if not url.startswith(("http://", "https://")):
        return [], f"{base_url!r} has no scheme: write http://{base_url.strip()}"
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read(1_000_000) or b"{}")
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            sent = "the key sent was refused" if api_key else "no key was sent"
            return [], (
                f"GET {url} answered HTTP {exc.code} ({sent}): put the server's key in "
                "FORKDECK_API_KEY (or the variable [model] api_key_env names)"
            )
        return [], f"GET {url} answered HTTP {exc.code}"
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            return [], f"cannot reach {url}: connection refused (is the server running?)"
        return [], f"cannot reach {url}: {reason}"
    except (TimeoutError, OSError) as exc:
        return [], f"cannot reach {url}: {exc}"
    except ValueError:
        return [], f"GET {url} did not answer JSON"
    items = data.get("data") if isinstance(data, dict) else None
    if items is None and isinstance(data, dict):
        items = data.get("models")  # Ollama's native /api/tags shape
    names = [
        str(item.get("id") or item.get("name"))
        for item in (items or [])
        if isinstance(item, dict) and (item.get("id") or item.get("name"))
    ]
    if not names:
        return [], f"GET {url} lists no model"
    return names, None


@dataclass
class ServerCheck:
    """One server and what it said."""

    role: str
    url: str
    reachable: bool
    models: list[str] = field(default_factory=list)
    problem: str | None = None
    wanted: str | None = None

    @property
    def missing_model(self) -> bool:
        """The model in use is not among the server's: vLLM and LM Studio answer 404 for it
        (a server listing one model, as llama.cpp does, serves it whatever the name)."""
        return bool(
            self.reachable and self.wanted and self.wanted not in self.models
            and len(self.models) != 1
        )

    @property
    def ok(self) -> bool:
        return self.reachable and not self.missing_model

    @property
    def verdict(self) -> str:
        if not self.reachable:
            return f"UNREACHABLE: {self.problem}"
        listed = ", ".join(self.models[:5])
        if self.missing_model:
            return (
                f"NO SUCH MODEL: it does not list {self.wanted!r} (it lists: {listed}); "
                f"use one of those, e.g. --model openai-compatible:{self.models[0]}@{self.url}"
            )
        if self.wanted and self.wanted not in self.models:
            return (
                f"OK, but WARNING: it does not list {self.wanted!r} (it lists: {listed}); "
                "llama.cpp serves its one model whatever the name, vLLM and LM Studio "
                "answer 404"
            )
        return f"OK: answers /models ({len(self.models)} model(s): {listed})"


@dataclass
class ModelsReport:
    """What ``forkdeck models`` prints (and returns as JSON)."""

    default: str | None
    resolved: str
    resolve_error: str | None
    keys_set: list[str]
    keys_unset: list[str]
    servers: list[ServerCheck]
    limits: dict[str, Any]
    branch_models: dict[int, str]
    branch_resolved: dict[int, tuple[str, str | None]] = field(default_factory=dict)
    """slot -> (what the branch model resolves to, the problem if it cannot be used)."""
    config_problems: list[str] = field(default_factory=list)
    """What is wrong in config.toml (each with its key and reason): shown first, and the
    verdict is not OK while any is left (the file's values are not what runs)."""
    hosted: str | None = None
    """The hosted provider the model in use talks to (not asked: only its key is checked)."""

    @property
    def ok(self) -> bool:
        return (
            self.resolve_error is None
            and not self.config_problems
            and all(s.ok for s in self.servers)
            and not any(problem for _, problem in self.branch_resolved.values())
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "default": self.default,
            "resolved": self.resolved,
            "resolve_error": self.resolve_error,
            "keys_set": self.keys_set,
            "keys_unset": self.keys_unset,
            "servers": [
                {"role": s.role, "url": s.url, "reachable": s.reachable, "models": s.models,
                 "problem": s.problem, "verdict": s.verdict}
                for s in self.servers
            ],
            "limits": self.limits,
            "branch_models": {str(k): v for k, v in self.branch_models.items()},
            "branch_resolved": {
                str(k): {"model": m, "problem": p} for k, (m, p) in self.branch_resolved.items()
            },
            "config_problems": self.config_problems,
            "hosted": self.hosted,
            "ok": self.ok,
        }

    def text(self) -> str:
        lines: list[str] = []
        for problem in self.config_problems:
            lines.append(f"CONFIG PROBLEM: {problem} (its default is used)")
        if self.config_problems:
            lines.append("  fix .pydantic-deep/config.toml; the values below are what runs now")
        lines.append(f"[model] default: {self.default or '(not set)'}")
        lines.append(f"model in use: {self.resolved}")
        if self.hosted:
            lines.append(
                f"  {self.hosted} is a hosted provider: its key is set, it was not asked "
                "(the first request tells)"
            )
        if "offline" in self.resolved and not self.resolve_error:
            lines.append("  (no LLM configured: see docs/models.md, \"Real models\")")
        if self.resolve_error:
            lines.append(f"  PROBLEM: {self.resolve_error}")
        for slot, name in sorted(self.branch_models.items()):
            resolved, problem = self.branch_resolved.get(slot, (name, None))
            lines.append(f"[fork.models] {slot} = {name} -> {resolved}")
            if problem:
                lines.append(f"  PROBLEM: {problem}")
        lines.append("keys set: " + (", ".join(self.keys_set) or "none"))
        if not self.keys_set:
            lines.append("  (no provider key in the environment: hosted models cannot be used)")
        for server in self.servers:
            lines.append(f"{server.role}: {server.url}")
            lines.append(f"  {server.verdict}")
        if not self.servers:
            lines.append("servers: none configured ([model] base_url / openai_base_url / "
                         "ollama_base_url, --base-url)")
        lines.append(
            "limits: " + ", ".join(f"{k}={v if v is not None else 'unlimited'}"
                                   for k, v in self.limits.items())
        )
        lines.append("verdict: " + ("OK" if self.ok else "NOT READY (see above)"))
        return "\n".join(lines)


def check_models(
    config: ModelConfig,
    *,
    requested: str | None = None,
    branch_models: Mapping[int, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 5.0,
) -> ModelsReport:
    """Build the report: resolve the model in use (no request), ask each server's /models."""
    env = os.environ if env is None else env
    keys_set = [k for k in ENV_KEYS if env.get(k, "").strip()]
    keys_unset = [k for k in ENV_KEYS if k not in keys_set]
    servers: list[ServerCheck] = []
    wanted_name = _bare(requested or config.default)
    seen: set[str] = set()
    urls: list[tuple[str, str]] = []
    if requested and requested.startswith(("http://", "https://")):
        urls.append(("--model server", requested))
    if requested and "@" in requested and "://" in requested.split("@", 1)[1]:
        urls.append(("--model server", requested.split("@", 1)[1]))
    if config.base_url:
        urls.append(("[model] base_url", config.base_url))
    if config.openai_base_url:
        urls.append(("[model] openai_base_url", config.openai_base_url))
    from branching_core.agent.models import env_server

    env_url, env_key = env_server(env)
    if env_url and not config.server_url:
        urls.append(("OPENAI_BASE_URL", env_url))
    ollama = config.ollama_base_url or env.get("OLLAMA_BASE_URL", "").strip()
    if ollama:
        base = ollama.rstrip("/")
        urls.append(("ollama", base if base.endswith("/v1") else base + "/v1"))
    resolved, error, used_url = _resolve(requested, config, env)
    for role, url in urls:
        if url in seen:
            continue
        seen.add(url)
        key = config.api_key or (env_key if url == env_url else None)
        names, problem = list_server_models(url, api_key=key, timeout=timeout)
        # Only the server the model in use talks to must list its name.
        wanted = wanted_name if used_url and _same_url(url, used_url) else None
        servers.append(ServerCheck(role, url, not problem, names, problem, wanted or None))
    limits = {
        "max_tokens": config.max_tokens,
        "request_timeout": config.request_timeout,
        "first_token_timeout": config.first_token_timeout,
        "max_concurrent_requests": config.max_concurrent_requests,
    }
    branch_resolved: dict[int, tuple[str, str | None]] = {}
    for slot, name in sorted((branch_models or {}).items()):
        shown, problem, _ = _resolve(name, config, env)
        branch_resolved[slot] = (shown, problem)
    hosted = None
    if error is None and used_url is None and ":" in resolved and "offline" not in resolved:
        hosted = resolved.split(":", 1)[0]
    return ModelsReport(
        config.default, resolved, error, keys_set, keys_unset, servers, limits,
        dict(branch_models or {}), branch_resolved, hosted=hosted,
    )


def _bare(name: str | None) -> str:
    if not name or name.startswith(("http://", "https://")):
        return ""
    from branching_core.agent.models import _clean_name

    return _clean_name(name)


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def _resolve(
    requested: str | None, config: ModelConfig, env: Mapping[str, str]
) -> tuple[str, str | None, str | None]:
    """(display name, problem, base URL the model talks to) of the model in use."""
    from branching_core.agent.models import connect_model, display_name
    from branching_core.errors import ConfigError

    try:
        model = connect_model(requested, config, env=env)
    except ConfigError as exc:
        return "offline (fallback)", str(exc), None
    url = getattr(model, "base_url", None)
    return display_name(model), None, str(url) if url else None


__all__ = ["ENV_KEYS", "ModelsReport", "ServerCheck", "check_models", "list_server_models"]
