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
    # [git] (issue 25): commit exactly the landed paths after every merge (/merge, the
    # model's merge_or_select, headless pattern commands), as if --git-commit were given
    git_commit_merges: bool = False

    def model_for_branch(self, slot: int) -> str | None:
        """The model branch ``slot`` (1-based) runs: its override, else the default model."""
        return self.branch_models.get(slot, self.model)


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


class _Invalid(Exception):
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
    _Field("git_commit_merges", "git.commit_merges", _boolean, False),  # issue 25
)
_BY_KEY = {f.key: f for f in _FIELDS}
_BY_ATTR = {f.attr: f for f in _FIELDS}
_MODELS_KEY = "fork.models"
_PRICES_KEY = "fork.prices"
_TABLES = ("fork", "model", "workspace", "review", "git")
_DEFAULTS = Settings()


def settings_keys() -> list[str]:
    """Every dotted key this version understands (for completion and help text)."""
    return [f.key for f in _FIELDS] + [f"{_MODELS_KEY}.<slot>"]
