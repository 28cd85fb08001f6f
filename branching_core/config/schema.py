"""The settings schema: ``Settings``, its fields, their validators and defaults.

Part of :mod:`branching_core.config` (see its docstring for the file format); reading is in
:mod:`~branching_core.config.reading`, writing in :mod:`~branching_core.config.store`.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from branching_core.errors import BranchingError
from branching_core.state_dir import STATE_DIR

CONFIG_DIR = STATE_DIR
CONFIG_FILE = "config.toml"

BACKEND_CHOICES = ("auto", "overlay", "reflink", "copy")
MergeStrategyName = Literal["manual", "auto", "auto_with_fallback", "vote"]
MERGE_STRATEGIES: tuple[MergeStrategyName, ...] = get_args(MergeStrategyName)
#: Model names accepted without a ``provider:`` prefix (pydantic-ai's built-in test model
#: and forkdeck's offline stub); everything else must name its provider.
BARE_MODEL_NAMES = frozenset({"offline", "test"})
MAX_BRANCHES_LIMIT = 100
MAX_DEPTH_LIMIT = 10

_HEADER = (
    "# forkdeck settings; rewritten by /fork-* commands (comments are not kept).\n"
    "# Format: see the docstring of branching_core/config/__init__.py.\n"
)
_PAST_HEADER_LINES = frozenset({"# Format: see the docstring of branching_core/config.py."})
"""Header lines earlier versions wrote (before config became a package): still ours, so a
file carrying one is not taken for one with comments of the user's own (no backup)."""
_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*:\S+$")
_TOML_POS_RE = re.compile(r"\(at line (\d+), column (\d+)\)")

BudgetKind = Literal["per-branch", "aggregate"]


@dataclass(frozen=True)
class Settings:
    """Every setting forkdeck reads from ``config.toml``, typed, with its default."""

    fork_branch_count: int = 2
    max_branches: int = 10
    max_depth: int = 2
    per_branch_budget_usd: float | None = None
    aggregate_budget_usd: float | None = None
    keep_resolved: int = 20
    branch_models: dict[int, str] = field(default_factory=dict)
    model: str | None = None
    openai_base_url: str | None = None
    ollama_base_url: str | None = None
    model_base_url: str | None = None
    api_key_env: str | None = None
    max_tokens: int | None = None
    request_timeout: float | None = None
    first_token_timeout: float | None = None
    max_concurrent_requests: int | None = None
    token_cap: int | None = None
    model_prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    backend: str = "auto"
    keep_artifacts: bool = False
    test_command: str | None = None
    test_timeout_s: float = 60.0
    merge_strategy: MergeStrategyName = "manual"
    confidence_threshold: float = 0.8
    auto_tune_threshold: bool = False
    difftool: str | None = None
    approval_required: tuple[str, ...] = ()
    """Tool names a fork's branches may only run after the user approves each call."""
    agents: dict[str, AgentProfileSettings] = field(default_factory=dict)
    """``[agents.<name>]`` external agent profiles (see ``AgentProfileSettings``)."""
    # -- [sandbox] network and [services.<name>] (docs/network.md) --
    sandbox_network: str | None = None
    """none | private | host; None: private for agents and services, none for commands."""
    network_stack: str = "auto"
    network_fallback: str | None = None
    services: dict[str, ServiceConfig] = field(default_factory=dict)
    # [git] (issue 25): commit exactly the landed paths after every merge (/merge, the
    # model's merge_or_select, headless pattern commands), as if --git-commit were given
    git_commit_merges: bool = False

    def model_for_branch(self, slot: int) -> str | None:
        """The model branch ``slot`` (1-based) runs: its override, else the default model."""
        return self.branch_models.get(slot, self.model)


@dataclass(frozen=True)
class ServiceConfig:
    """One ``[services.<name>]`` table (checked by ``config.services``)."""

    command: str
    port: int | None = None
    ready: str = "tcp"
    env: dict[str, str] = field(default_factory=dict)
    autostart: bool = False
    stop_signal: str = "TERM"
    stop_timeout: float = 10.0
    ready_timeout: float = 60.0


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with the file: ``key`` is dotted (``fork.branches``), None for the
    whole file (syntax error); ``line`` is 1-based when it could be located."""

    key: str | None
    reason: str
    line: int | None = None

    @property
    def message(self) -> str:
        """One line for the UI, e.g. ``config.toml line 3: fork.branches: must be ...``."""
        where = f"{CONFIG_FILE} line {self.line}" if self.line else CONFIG_FILE
        what = f"{self.key}: {self.reason}" if self.key else self.reason
        return f"{where}: {what}"


@dataclass(frozen=True)
class SettingsLoad:
    """What :func:`load_settings` found: usable settings plus everything it ignored."""

    settings: Settings
    problems: list[ConfigProblem]
    path: Path
    exists: bool


@dataclass(frozen=True)
class SaveResult:
    """What a mutator wrote: the config path and, when the old text could not be kept
    as it was, where an exact copy of it went (``backup``)."""

    path: Path
    backup: Path | None = None


class _Invalid(BranchingError):
    """A value failed validation; the message is the reason shown to the user."""


# --------------------------------------------------------------------------- validators


def _int_in(lo: int, hi: int) -> Callable[[object], int]:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Invalid(f"expected an integer, got {_show(value)}")
        if not lo <= value <= hi:
            raise _Invalid(f"must be between {lo} and {hi}, got {value}")
        return value

    return check


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Invalid(f"expected a number, got {_show(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise _Invalid(f"must be a finite number, got {value}")
    return number


def _positive(value: object) -> float:
    number = _number(value)
    if number <= 0:
        raise _Invalid(f"must be greater than 0, got {_show(value)}")
    return number


def _fraction(value: object) -> float:
    number = _number(value)
    if not 0.0 <= number <= 1.0:
        raise _Invalid(f"must be between 0 and 1, got {_show(value)}")
    return number


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"expected true or false, got {_show(value)}")
    return value


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"expected a string, got {_show(value)}")
    if not value.strip():
        raise _Invalid("must not be empty")
    if "\n" in value or "\r" in value:
        raise _Invalid("must be a single line")
    return value


def _one_of(choices: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        text = _text(value)
        if text not in choices:
            raise _Invalid(f"must be one of {', '.join(choices)}, got {text!r}")
        return text

    return check


def _model_name(value: object) -> str:
    text = _text(value).strip()
    if text in BARE_MODEL_NAMES or _MODEL_RE.match(text):
        return text
    raise _Invalid(
        f"model {text!r} needs a provider prefix, e.g. anthropic:claude-sonnet-4-5 "
        f"(or one of {', '.join(sorted(BARE_MODEL_NAMES))}), or "
        f"openai-compatible:{text} with [model] base_url set"
    )


def _env_var_name(value: object) -> str:
    """The *name* of an environment variable (the key itself never goes into the file)."""
    if not isinstance(value, str) or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", value) is None:
        raise _Invalid(f"must name an environment variable (like VLLM_API_KEY), got {_show(value)}")
    return value


def _base_url(value: object) -> str:
    text = _text(value).strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _Invalid(f"expected an http(s) URL, got {text!r}")
    return text


def _command(value: object) -> str:
    text = _text(value)
    try:
        shlex.split(text)
    except ValueError as exc:
        raise _Invalid(f"cannot be split into arguments: {exc}") from None
    return text


_TOOL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def _tool_names(value: object) -> tuple[str, ...]:
    """``["write_file", "run_command"]``: tool names (``"*"``: every tool)."""
    if not isinstance(value, list):
        raise _Invalid(f"expected an array of tool names, got {_show(value)}")
    names = []
    for item in value:
        if not isinstance(item, str) or not (item == "*" or _TOOL_NAME_RE.match(item)):
            raise _Invalid(f"expected tool names (or \"*\"), got {_show(item)}")
        names.append(item)
    return tuple(dict.fromkeys(names))


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class _Field:
    attr: str
    key: str  # dotted TOML key
    check: Callable[[object], Any]
    optional: bool  # None is a legal value (and means "absent")


_FIELDS: tuple[_Field, ...] = (
    _Field("fork_branch_count", "fork.branches", _int_in(1, MAX_BRANCHES_LIMIT), False),
    _Field("max_branches", "fork.max_branches", _int_in(1, MAX_BRANCHES_LIMIT), False),
    _Field("max_depth", "fork.max_depth", _int_in(1, MAX_DEPTH_LIMIT), False),
    _Field("per_branch_budget_usd", "fork.per_branch_budget_usd", _positive, True),
    _Field("aggregate_budget_usd", "fork.aggregate_budget_usd", _positive, True),
    _Field("keep_resolved", "fork.keep_resolved", _int_in(0, 10000), False),
    _Field("model", "model.default", _model_name, True),
    _Field("openai_base_url", "model.openai_base_url", _base_url, True),
    _Field("ollama_base_url", "model.ollama_base_url", _base_url, True),
    _Field("model_base_url", "model.base_url", _base_url, True),
    _Field("api_key_env", "model.api_key_env", _env_var_name, True),
    _Field("max_tokens", "model.max_tokens", _int_in(1, 10_000_000), True),
    _Field("request_timeout", "model.request_timeout", _positive, True),
    _Field("first_token_timeout", "model.first_token_timeout", _positive, True),
    _Field("max_concurrent_requests", "model.max_concurrent_requests", _int_in(1, 1000), True),
    _Field("token_cap", "fork.token_cap", _int_in(1, 10**12), True),
    _Field("backend", "workspace.backend", _one_of(BACKEND_CHOICES), False),
    _Field("keep_artifacts", "workspace.keep_artifacts", _boolean, False),
    _Field("test_command", "review.test_command", _command, True),
    _Field("test_timeout_s", "review.test_timeout_s", _positive, False),
    _Field("merge_strategy", "review.merge_strategy", _one_of(MERGE_STRATEGIES), False),
    _Field("confidence_threshold", "review.confidence_threshold", _fraction, False),
    _Field("auto_tune_threshold", "review.auto_tune_threshold", _boolean, False),
    _Field("difftool", "review.difftool", _command, True),
    _Field("approval_required", "fork.approval_required", _tool_names, False),
    _Field("sandbox_network", "sandbox.network", _one_of(("none", "private", "host")), True),
    _Field("network_stack", "sandbox.network_stack", _one_of(("auto", "pasta", "slirp4netns")),
           False),
    _Field("network_fallback", "sandbox.network_fallback", _one_of(("none", "host")), True),
    _Field("git_commit_merges", "git.commit_merges", _boolean, False),  # issue 25
)
_BY_KEY = {f.key: f for f in _FIELDS}
_BY_ATTR = {f.attr: f for f in _FIELDS}
_MODELS_KEY = "fork.models"
_PRICES_KEY = "fork.prices"
_TABLES = ("fork", "model", "workspace", "review", "sandbox", "services", "git")
_SERVICES_TABLE = "services"  # [services.<name>]: parsed by config.services
_DEFAULTS = Settings()


def settings_keys() -> list[str]:
    """Every dotted key this version understands (for completion and help text)."""
    return [f.key for f in _FIELDS] + [f"{_MODELS_KEY}.<slot>"]


# --------------------------------------------------------------------------- [agents.<name>]
# External CLI agents raced in branches (``forkdeck agents``, ``agent:<profile>`` rows of
# the fork picker). Each table overrides a built-in profile's keys (claude, codex, aider,
# gemini) or defines a new one; ``branching_core.external.profiles`` turns them into
# runnable profiles. Example::
#
#     [agents.claude]
#     expose = ["~/.claude/:rw", "~/.claude.json:rw"]  # path[:ro|:rw], ro by default;
#                                                       # "dir/:rw" is created if missing
#     timeout_s = 900
#     cost_budget_usd = 2.0
#
#     [agents.mine]
#     command = "my-agent --yes --task {prompt}"        # no {prompt}: typed on its terminal
#     resume = "my-agent --resume {session} --task {prompt}"
#     network = true                                    # default true for agents
#     env = ["MY_AGENT_*", "LOG_LEVEL=debug"]           # names, NAME* globs, NAME=value
#     steer = true                                      # reads its terminal while working
#     memory = "2G"
#     cpu = 1.5
#     pids = 512

AGENTS_TABLE = "agents"
_AGENT_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_AGENT_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\*|=.*)?$", re.DOTALL)


@dataclass(frozen=True)
class AgentProfileSettings:
    """One ``[agents.<name>]`` table, validated; None means "not set in the file"."""

    command: str | None = None
    resume: str | None = None
    network: bool | None = None
    expose: tuple[tuple[str, bool, bool], ...] | None = None  # (path, writable, create)
    env: tuple[str, ...] | None = None
    steer: bool | None = None
    timeout_s: float | None = None
    cost_budget_usd: float | None = None
    memory: str | None = None
    cpu: float | None = None
    pids: int | None = None
    description: str | None = None


def _agent_expose(value: object) -> tuple[tuple[str, bool, bool], ...]:
    """``["~/.claude/:rw", "/opt/tool/cfg"]``: absolute or ``~/`` paths, ``:ro`` (default)
    or ``:rw``; a read-write path written with a trailing ``/`` is a directory created on
    first use (a missing path is otherwise skipped)."""
    if not isinstance(value, list):
        raise _Invalid(f"expected an array of paths, got {_show(value)}")
    out = []
    for item in value:
        text = _text(item).strip()
        mode = "ro"
        if text.endswith((":ro", ":rw")):
            text, mode = text[:-3], text[-2:]
        if not (text.startswith("/") or text == "~" or text.startswith("~/")):
            raise _Invalid(f"expose path {text!r} must be absolute or start with ~/")
        if "\0" in text or ".." in text.split("/"):
            raise _Invalid(f"expose path {text!r} must not contain '..'")
        # A trailing "/" names a directory: created (0700) on first use when read-write.
        is_dir = len(text) > 1 and text.endswith("/")
        out.append((text.rstrip("/") or text, mode == "rw", mode == "rw" and is_dir))
    return tuple(out)


def _agent_env(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _Invalid(f"expected an array of variable names, got {_show(value)}")
    for item in value:
        if not isinstance(item, str) or not _AGENT_ENV_RE.match(item):
            raise _Invalid(f"expected NAME, NAME* or NAME=value, got {_show(item)}")
    return tuple(value)


def _agent_memory(value: object) -> str:
    text = _text(value).strip()
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?[KMGTkmgt]?", text):
        raise _Invalid(f"expected a size like 512M or 2G, got {text!r}")
    return text


_AGENT_KEYS: dict[str, Callable[[object], Any]] = {
    "command": _command,
    "resume": _command,
    "network": _boolean,
    "expose": _agent_expose,
    "env": _agent_env,
    "steer": _boolean,
    "timeout_s": _positive,
    "cost_budget_usd": _positive,
    "memory": _agent_memory,
    "cpu": _positive,
    "pids": _int_in(1, 1_000_000),
    "description": _text,
}


def agent_profiles(raw: object, problem: Callable[[str, str], None]
                   ) -> dict[str, AgentProfileSettings]:
    """The ``[agents]`` table: one ``AgentProfileSettings`` per well-named sub-table; a
    bad key is reported (``agents.<name>.<key>``) and left unset, the rest still counts."""
    if not isinstance(raw, dict):
        problem(AGENTS_TABLE, f"expected a table of agent profiles, got {_show(raw)}")
        return {}
    out: dict[str, AgentProfileSettings] = {}
    for name, table in raw.items():
        key = f"{AGENTS_TABLE}.{name}"
        if not _AGENT_NAME_RE.match(name) or name == "cmd":
            problem(key, "agent names are letters, digits, _ and - (and not 'cmd'); ignored")
            continue
        if not isinstance(table, dict):
            problem(key, f"expected a table, got {_show(table)}; ignored")
            continue
        values: dict[str, Any] = {}
        for sub, value in table.items():
            check = _AGENT_KEYS.get(sub)
            if check is None:
                problem(f"{key}.{sub}", "unknown setting (kept, but ignored)")
                continue
            try:
                values[sub] = check(value)
            except _Invalid as exc:
                problem(f"{key}.{sub}", f"{exc}; ignored")
        out[name] = AgentProfileSettings(**values)
    return out
