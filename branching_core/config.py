"""forkdeck's settings, persisted to ``<workspace>/.pydantic-deep/config.toml``.

Why a module of its own: the TUI's ``/fork-branches``, ``/fork-budget`` and ``/fork-model``
commands must survive restarts, and a hand-edited file with one typo must never cost the
user a session (or the rest of their file). So reading is forgiving and writing is careful:

* :func:`load_settings` never writes. A bad value falls back to the default *for that key
  only* and is reported as a :class:`ConfigProblem` (dotted key, reason, line); a TOML
  syntax error falls back to all defaults and is reported once, with its line.
* :class:`SettingsStore` mutators validate first (raising :class:`ConfigError`, one line,
  with the key, and touching nothing), then re-read the file, change one key and write the
  whole file atomically (:func:`branching_core.atomicio.atomic_write`, durable).

File format (every key is optional; an absent key means its default)::

    # forkdeck settings; rewritten by /fork-* commands (comments are not kept)
    [fork]
    branches = 2                      # branch count for the next /fork, 1..max_branches
    max_branches = 10                 # 1..100
    max_depth = 2                     # nested forks, 1..10
    per_branch_budget_usd = 0.25      # > 0, or absent for no budget
    aggregate_budget_usd = 2.0        # > 0, or absent for no budget
    keep_resolved = 20                # resolved forks kept in .pydantic-deep/forks, 0..10000
    approval_required = ["run_command", "write_file"]   # tools a branch runs only once
                                      # approved in the TUI ("*": every tool)

    [fork.models]                     # branch slot (1-based) -> "provider:model"
    1 = "anthropic:claude-opus-4-6"
    2 = "openrouter:openai/gpt-4.1"

    [fork.prices]                     # USD per million tokens, for unlisted models
    "qwen2.5-7b-instruct" = {input = 0.5, output = 1.5}
    # token_cap = 200000 (under [fork]): budget for a model with no price

    [model]
    default = "anthropic:claude-sonnet-4-5"   # "provider:name", "offline" / "test", or a
                                              # bare name when base_url is set
    base_url = "http://localhost:8080/v1"     # OpenAI-compatible server for every name
    openai_base_url = "http://localhost:8000/v1"   # where openai:NAME goes
    ollama_base_url = "http://localhost:11434/v1"  # where ollama:NAME goes
    api_key_env = "VLLM_API_KEY"              # env variable holding the server's key
                                              # (default FORKDECK_API_KEY)
    max_tokens = 4096                 # per request
    request_timeout = 300             # seconds for a whole request
    first_token_timeout = 120         # seconds until the first token
    max_concurrent_requests = 1       # 1 for a single-slot local server (default unlimited)

    [workspace]
    backend = "auto"                  # auto | overlay | reflink | copy
    keep_artifacts = false            # keep .pydantic-deep/forks/<id>/ after resolution

    [review]
    test_command = "pytest -q"
    test_timeout_s = 60.0             # > 0
    merge_strategy = "manual"         # manual | auto | auto_with_fallback | vote
    confidence_threshold = 0.8        # 0..1
    auto_tune_threshold = false       # tune confidence_threshold from the judge log
    difftool = "meld {parent} {branch}"   # see branching_core.review.editor

Keys this version does not know are reported as problems (so a typo such as
``brnaches`` is visible) but are kept when the file is rewritten: a newer forkdeck may
understand them.

What a mutator does to text it cannot keep: ``tomli_w`` has no round-trip mode, so a
rewrite keeps every key and value but not comments or layout. When the file on disk is
broken (TOML syntax error, not UTF-8, or a key whose type blocks the change, such as
``fork = 3``) or carries comments of the user's own, the mutator first copies the exact
bytes to ``config.toml.broken-<UTC timestamp>`` (broken) or ``config.toml.bak-<UTC
timestamp>`` (comments), then writes. The copy is returned in
:attr:`SaveResult.backup` and kept on :attr:`SettingsStore.last_backup`, so the UI can say
where the old text went. Nothing is ever deleted silently. A change to a broken file
carries over every value that still parses (the lines the parser rejects are left out,
see :mod:`branching_core.toml_salvage`), so one typo never costs the user the rest.

What is never touched: a ``config.toml`` (or ``.pydantic-deep/``) that is a symlink leading
outside the workspace is neither read (defaults, one problem) nor written nor backed up
(:class:`ConfigError`): a repository could ship ``config.toml -> ~/.bashrc``. A link that
stays inside the workspace is read and written through. A read-only ``config.toml``
(``chmod 444``) is the user's decision: mutators refuse with one line. Values nested
deeper than :data:`branching_core.toml_salvage.MAX_NESTING` levels are a problem for
that key (the parser and ``tomli_w`` recurse per level). Every write also leaves a
``.gitignore`` in ``.pydantic-deep/`` that ignores everything but ``config.toml``.

Pure stdlib + ``tomllib`` + ``tomli_w``: importing this module must stay cheap and must
not import pydantic-ai, textual, rich or the app.
"""

from __future__ import annotations

import copy
import math
import os
import re
import shlex
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

import tomli_w

from branching_core import toml_salvage
from branching_core.atomicio import atomic_write
from branching_core.errors import ConfigError
from branching_core.state_dir import STATE_DIR, ensure_gitignore, escape_target

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
    "# Format: see the docstring of branching_core/config.py.\n"
)
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
)
_BY_KEY = {f.key: f for f in _FIELDS}
_BY_ATTR = {f.attr: f for f in _FIELDS}
_MODELS_KEY = "fork.models"
_PRICES_KEY = "fork.prices"
_TABLES = ("fork", "model", "workspace", "review")
_DEFAULTS = Settings()


# --------------------------------------------------------------------------- reading


def config_path(workspace_root: Path) -> Path:
    """Where the settings of ``workspace_root`` live."""
    return Path(workspace_root) / CONFIG_DIR / CONFIG_FILE


@dataclass
class _Raw:
    """The file as read: ``doc`` is None when it could not be parsed."""

    exists: bool
    data: bytes | None
    doc: dict[str, Any] | None
    problems: list[ConfigProblem]
    unreadable: str | None = None  # OS error text: the file exists but cannot be read
    escapes_to: str | None = None  # where a symlink leads, when that is outside the workspace
    lossy: bool = False  # ``doc`` lacks values of the file's (too deep): rewriting needs a backup


def _escape_reason(path: Path, outside: str) -> str:
    return (
        f"{path.parent.name}/{path.name} leads outside the workspace (to {outside}); "
        "forkdeck neither reads nor writes settings through such a link"
    )


def _read_bytes(path: Path) -> bytes:
    """The file's bytes; a FIFO, device or directory is refused without blocking."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"not a regular file (mode {stat.filemode(st.st_mode)})")
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_raw(path: Path, workspace_root: Path | None = None) -> _Raw:
    root = path.parent.parent if workspace_root is None else workspace_root
    outside = escape_target(root, path)
    if outside is not None:
        reason = _escape_reason(path, outside) + "; using defaults"
        exists = os.path.lexists(path)
        return _Raw(exists, None, None, [ConfigProblem(None, reason)], escapes_to=outside)
    try:
        data = _read_bytes(path)
    except FileNotFoundError:
        return _Raw(False, None, {}, [])
    except OSError as exc:
        reason = f"cannot read the file ({exc.strerror or exc}); using defaults"
        return _Raw(True, None, None, [ConfigProblem(None, reason)], unreadable=reason)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"not valid UTF-8 at byte {exc.start}; using defaults"
        return _Raw(True, data, None, [ConfigProblem(None, reason)])
    try:
        doc = toml_salvage.parse(text)
    except tomllib.TOMLDecodeError as exc:
        return _Raw(True, data, None, [_syntax_problem(exc)])
    deep = toml_salvage.too_deep(doc)
    if not deep:
        return _Raw(True, data, doc, [])
    problems = [
        ConfigProblem(
            key,
            f"nested deeper than {toml_salvage.MAX_NESTING} levels; ignored",
            _find_line(text, key),
        )
        for key in deep
    ]
    return _Raw(True, data, toml_salvage.drop_keys(doc, deep), problems, lossy=True)


def _syntax_problem(exc: tomllib.TOMLDecodeError) -> ConfigProblem:
    message = str(exc)
    match = _TOML_POS_RE.search(message)
    line = int(match.group(1)) if match else None
    reason = _TOML_POS_RE.sub("", message).strip().rstrip(".")
    reason = reason[:1].lower() + reason[1:] if reason else "invalid TOML"
    return ConfigProblem(None, f"TOML syntax error: {reason}; using defaults", line)


def _validate(doc: Mapping[str, Any], text: str | None) -> tuple[Settings, list[ConfigProblem]]:
    """Turn a parsed document into settings, one default per bad key, plus the problems."""
    problems: list[ConfigProblem] = []
    values: dict[str, Any] = {}

    def problem(key: str, reason: str) -> None:
        problems.append(ConfigProblem(key, reason, _find_line(text, key)))

    tables: dict[str, Mapping[str, Any]] = {}
    for name, value in doc.items():
        if name in _TABLES:
            if isinstance(value, dict):
                tables[name] = value
            else:
                problem(name, f"expected a table, got {_show(value)}; using defaults for it")
        else:
            problem(name, "unknown setting (kept, but ignored)")

    for name, table in tables.items():
        for sub, value in table.items():
            key = f"{name}.{sub}"
            if key in (_MODELS_KEY, _PRICES_KEY):
                continue
            if key == "model.default" and _has_server(table):
                try:  # a bare name is fine when an OpenAI-compatible server is configured
                    values["model"] = _text(value).strip()
                except _Invalid as exc:
                    problem(key, f"{exc}; using {_show_default(None)}")
                continue
            spec = _BY_KEY.get(key)
            if spec is None:
                problem(key, "unknown setting (kept, but ignored)")
                continue
            try:
                values[spec.attr] = spec.check(value)
            except _Invalid as exc:
                default = getattr(_DEFAULTS, spec.attr)
                problem(key, f"{exc}; using {_show_default(default)}")

    # Cross-field rules, checked after every single value is known to be well typed.
    max_branches = values.get("max_branches", _DEFAULTS.max_branches)
    count = values.get("fork_branch_count")
    if count is not None and count > max_branches:
        fallback = min(_DEFAULTS.fork_branch_count, max_branches)
        problem(
            "fork.branches",
            f"must be between 1 and fork.max_branches ({max_branches}), got {count}; "
            f"using {fallback}",
        )
        values["fork_branch_count"] = fallback
    elif count is None:
        values["fork_branch_count"] = min(_DEFAULTS.fork_branch_count, max_branches)

    models: dict[int, str] = {}
    raw_models = tables.get("fork", {}).get("models")
    if raw_models is not None and not isinstance(raw_models, dict):
        problem(_MODELS_KEY, f"expected a table of slot = model, got {_show(raw_models)}")
    elif raw_models:
        for slot_text, model in raw_models.items():
            key = f"{_MODELS_KEY}.{slot_text}"
            try:
                slot = _slot(slot_text, max_branches)
                models[slot] = _model_name(model)
            except _Invalid as exc:
                problem(key, f"{exc}; entry ignored")
    values["branch_models"] = dict(sorted(models.items()))
    values["model_prices"] = _prices(tables.get("fork", {}).get("prices"), problem)
    problems.sort(key=lambda p: (p.line is None, p.line or 0))
    return Settings(**values), problems


def _has_server(model_table: Mapping[str, Any]) -> bool:
    """Whether ``[model]`` names an OpenAI-compatible server (so bare model names are fine)."""
    return any(isinstance(model_table.get(k), str) for k in ("base_url", "openai_base_url"))


def _prices(raw: object, problem: Callable[[str, str], None]) -> dict[str, tuple[float, float]]:
    """``[fork.prices]``: ``"model" = {input = 0.5, output = 1.5}`` (USD per million tokens)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problem(_PRICES_KEY, f"expected a table of model = {{input, output}}, got {_show(raw)}")
        return {}
    prices: dict[str, tuple[float, float]] = {}
    for name, value in raw.items():
        key = f"{_PRICES_KEY}.{name}"
        try:
            if not isinstance(value, dict) or set(value) != {"input", "output"}:
                raise _Invalid("expected {input = USD per Mtok, output = USD per Mtok}")
            low = [_number(value["input"]), _number(value["output"])]
            if any(v < 0 for v in low):
                raise _Invalid("prices must not be negative")
            prices[str(name)] = (low[0], low[1])
        except _Invalid as exc:
            problem(key, f"{exc}; entry ignored")
    return prices


def _slot(text: object, max_branches: int) -> int:
    """A ``fork.models`` key: the 1-based branch slot, written as a TOML key string."""
    if isinstance(text, int) and not isinstance(text, bool):
        number = text
    elif isinstance(text, str) and text.strip().isdigit():
        number = int(text.strip())
    else:
        raise _Invalid(f"branch slot must be a whole number, got {_show(text)}")
    if not 1 <= number <= max_branches:
        raise _Invalid(f"branch slot must be between 1 and {max_branches}, got {number}")
    return number


def _show_default(value: object) -> str:
    return "no value" if value is None else f"the default {_show(value)}"


_HEADER_RE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ASSIGN_RE = re.compile(r"^\s*([A-Za-z0-9_\-\"'][^=]*?)\s*=")


def _normalise_key(raw: str) -> str:
    """``fork . "models"`` -> ``fork.models``: split on dots outside quotes, unquote."""
    parts: list[str] = []
    current: list[str] = []
    quote: str | None = None
    for char in raw:
        if quote:
            if char == quote:
                quote = None
            else:
                current.append(char)
        elif char in "\"'":
            quote = char
        elif char == ".":
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return ".".join(parts)


def _find_line(text: str | None, key: str) -> int | None:
    """Best effort: the 1-based line where dotted ``key`` is assigned or its table opens.

    A small scanner (table headers and ``key =`` lines), not a TOML parser: it may miss keys
    inside multi-line strings or inline tables, and then the problem simply has no line.
    """
    if not text:
        return None
    table = ""
    header_line: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER_RE.match(line)
        if header and not line.lstrip().startswith("[["):
            table = _normalise_key(header.group(1))
            if table == key:
                header_line = header_line or number
            continue
        assign = _ASSIGN_RE.match(line)
        if assign:
            name = _normalise_key(assign.group(1))
            full = f"{table}.{name}" if table else name
            if full == key:
                return number
    return header_line


def load_settings(workspace_root: Path) -> SettingsLoad:
    """Read ``<workspace_root>/.pydantic-deep/config.toml``; never writes, never raises
    for file content.

    A missing file means all defaults and no problems. A syntax error (or unreadable
    file) means all defaults and one problem with the line. Each bad value means that
    key's default and one problem naming the dotted key and the reason.
    """
    path = config_path(workspace_root)
    raw = _read_raw(path, Path(workspace_root))
    if raw.doc is None:
        return SettingsLoad(Settings(), list(raw.problems), path, raw.exists)
    text = raw.data.decode("utf-8") if raw.data is not None else None
    settings, problems = _validate(raw.doc, text)
    return SettingsLoad(settings, [*raw.problems, *problems], path, raw.exists)


# --------------------------------------------------------------------------- writing


def _user_comments(text: str) -> bool:
    """True when the file holds full-line comments other than the header we write."""
    ours = set(_HEADER.splitlines())
    return any(
        line.lstrip().startswith("#") and line.strip() not in ours for line in text.splitlines()
    )


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _backup(path: Path, data: bytes, tag: str) -> Path:
    """Copy ``data`` (the file's exact bytes) next to it; never overwrites an older copy."""
    stamp = _timestamp()
    for attempt in range(1000):
        suffix = f".{tag}-{stamp}" + (f"-{attempt}" if attempt else "")
        candidate = path.with_name(path.name + suffix)
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return candidate
    raise ConfigError(f"cannot find a free backup name for {path}", path=str(path))


def _dump(doc: Mapping[str, Any]) -> bytes:
    ordered: dict[str, Any] = {name: doc[name] for name in _TABLES if name in doc}
    ordered.update({k: v for k, v in doc.items() if k not in ordered})
    return (_HEADER + "\n" + tomli_w.dumps(ordered)).encode("utf-8")


def _salvage(data: bytes | None) -> dict[str, Any]:
    """What a broken file still holds: lines that are not UTF-8 or that the parser rejects
    are left out, every other value is kept (see :mod:`branching_core.toml_salvage`)."""
    if not data:
        return {}
    lines: list[str] = []
    for raw_line in data.split(b"\n"):
        try:
            lines.append(raw_line.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append("")
    doc, _ = toml_salvage.salvage("\n".join(lines))
    return toml_salvage.drop_keys(doc, toml_salvage.too_deep(doc))


class SettingsStore:
    """The settings of one workspace, with write-through mutators for the TUI commands.

    Every mutator re-reads the file (so edits made in an editor since the last load are
    kept), validates the change against the whole resulting document, writes atomically
    and reloads. An invalid change raises :class:`ConfigError` (one line, ``key`` set) and
    leaves the file byte-for-byte as it was.
    """

    def __init__(self, workspace_root: Path) -> None:
        self.workspace_root = Path(workspace_root)
        self.path = config_path(self.workspace_root)
        self.last_backup: Path | None = None
        self._load = load_settings(self.workspace_root)

    @property
    def settings(self) -> Settings:
        return self._load.settings

    @property
    def problems(self) -> list[ConfigProblem]:
        return list(self._load.problems)

    def reload(self) -> SettingsLoad:
        """Re-read the file (e.g. after the user edited it by hand)."""
        self._load = load_settings(self.workspace_root)
        return self._load

    # -- the /fork-* commands -------------------------------------------------------

    def set_branch_count(self, n: int | str) -> SaveResult:
        """``/fork-branches N``: the branch count of the next fork, 1..max_branches."""
        return self.set("fork.branches", _coerce_int(n, "fork.branches", self.path))

    def set_budget(self, kind: BudgetKind | str, usd: float | str | None) -> SaveResult:
        """``/fork-budget per-branch|aggregate USD``; ``usd=None`` clears that one budget."""
        normalised = kind.strip().lower().replace("_", "-")
        if normalised == "per-branch":
            key = "fork.per_branch_budget_usd"
        elif normalised == "aggregate":
            key = "fork.aggregate_budget_usd"
        else:
            raise ConfigError(
                f"unknown budget kind {kind!r}: use per-branch or aggregate",
                key="fork.budget",
                path=str(self.path),
            )
        value = None if usd is None else _coerce_float(usd, key, self.path)
        return self.set(key, value)

    def clear_budgets(self) -> SaveResult:
        """``/fork-budget clear``: both budgets unset."""
        return self._write({"fork.per_branch_budget_usd": None, "fork.aggregate_budget_usd": None})

    def set_branch_model(self, i: int | str, model: str) -> SaveResult:
        """``/fork-model I MODEL``: slot ``i`` (1..fork_branch_count) runs ``model``."""
        key = f"{_MODELS_KEY}.{i}"
        slot = _coerce_int(i, key, self.path)
        count = load_settings(self.workspace_root).settings.fork_branch_count  # fresh, not cached
        if not 1 <= slot <= count:
            raise ConfigError(
                f"{key}: branch slot must be between 1 and fork.branches ({count}), got {slot}",
                key=key,
                path=str(self.path),
            )
        try:
            name = _model_name(model)
        except _Invalid as exc:
            raise ConfigError(f"{key}: {exc}", key=key, path=str(self.path)) from None
        return self._write({f"{_MODELS_KEY}.{slot}": name})

    def clear_branch_model(self, i: int | str) -> SaveResult:
        """``/fork-model I clear``: slot ``i`` falls back to the default model."""
        slot = _coerce_int(i, f"{_MODELS_KEY}.{i}", self.path)
        return self._write({f"{_MODELS_KEY}.{slot}": None})

    def clear_branch_models(self) -> SaveResult:
        """``/fork-model clear``: every per-branch override removed."""
        return self._write({_MODELS_KEY: None})

    def set(self, key: str, value: object) -> SaveResult:
        """Set one setting by dotted key (``review.test_timeout_s``) or attribute name
        (``test_timeout_s``). ``None`` removes the key, i.e. restores its default.

        A string is converted for number and boolean settings (``"30"``, ``"true"``), so
        a ``/config``-style command can pass the user's text straight through.
        """
        spec = _BY_KEY.get(key) or _BY_ATTR.get(key)
        if spec is None:
            if key.startswith(_MODELS_KEY + "."):
                slot = key[len(_MODELS_KEY) + 1 :]
                if value is None:
                    return self.clear_branch_model(slot)
                return self.set_branch_model(slot, str(value))
            known = ", ".join(f.key for f in _FIELDS)
            raise ConfigError(
                f"unknown setting {key!r}; known: {known}", key=key, path=str(self.path)
            )
        if isinstance(value, str) and spec.check in (_positive, _fraction):
            value = _coerce_float(value, spec.key, self.path)
        elif isinstance(value, str) and spec.attr in (
            "fork_branch_count",
            "max_branches",
            "max_depth",
        ):
            value = _coerce_int(value, spec.key, self.path)
        elif isinstance(value, str) and spec.check is _boolean:
            value = _coerce_bool(value, spec.key, self.path)
        if value is not None:  # None removes the key, which restores the default
            try:
                value = spec.check(value)
            except _Invalid as exc:
                raise ConfigError(f"{spec.key}: {exc}", key=spec.key, path=str(self.path)) from None
        return self._write({spec.key: value})

    # -- the write path ------------------------------------------------------------

    def _write(self, changes: Mapping[str, object]) -> SaveResult:
        """Apply ``changes`` (dotted key -> value, None = remove) to the file on disk."""
        path_text = str(self.path)
        raw = _read_raw(self.path, self.workspace_root)
        if raw.escapes_to is not None:
            reason = _escape_reason(self.path, raw.escapes_to)
            raise ConfigError(f"not changing settings: {reason}", path=path_text)
        if raw.unreadable is not None:
            raise ConfigError(
                f"not changing {self.path}: {raw.unreadable.split(';')[0]}", path=path_text
            )
        self._refuse_read_only()
        backup_tag: str | None = "broken" if raw.lossy else None
        if raw.doc is None:
            base = _salvage(raw.data)  # carry over every value that still parses
            backup_tag = "broken"
        else:
            base = raw.doc
        doc = copy.deepcopy(base)
        text = raw.data.decode("utf-8") if raw.data is not None and raw.doc is not None else None

        for key, value in changes.items():
            if _set_dotted(doc, key, value):
                backup_tag = backup_tag or "broken"

        # Validate the whole result; only problems the change *introduces* are refused, so a
        # bad key elsewhere (already reported) never blocks an unrelated command.
        before = {(p.key, p.reason) for p in _validate(base, None)[1]}
        _, after_problems = _validate(doc, None)
        for p in after_problems:
            if (p.key, p.reason) in before or not (p.key is None or _touches(p.key, changes)):
                continue
            changed = next(iter(changes))
            reason = f"{p.key}: {_core_reason(p.reason)}"
            if p.key != changed and len(changes) == 1:
                shown = _show(changes[changed])
                reason = f"refusing {changed} = {shown}: {reason}"
            raise ConfigError(reason, key=changed if len(changes) == 1 else p.key, path=path_text)

        if backup_tag is None and text is not None and _user_comments(text):
            backup_tag = "bak"
        backup: Path | None = None
        try:
            payload = _dump(doc)
            # A link inside the workspace is written through (dotfile managers keep it).
            target = Path(os.path.realpath(self.path))
            target.parent.mkdir(parents=True, exist_ok=True)
            if backup_tag is not None and raw.data is not None:
                backup = _backup(self.path, raw.data, backup_tag)
            atomic_write(target, payload, durable=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot write {self.path}: {exc.strerror or exc}", path=path_text
            ) from None
        ensure_gitignore(self.workspace_root)
        self.last_backup = backup
        self.reload()
        return SaveResult(self.path, backup)

    def _refuse_read_only(self) -> None:
        """A config.toml the user made read-only (``chmod 444``) is theirs: never replaced."""
        try:
            st = os.stat(self.path)
        except OSError:
            return  # missing: it will be created; other errors surface when writing
        if st.st_mode & 0o222 and os.access(self.path, os.W_OK):
            return
        mode = stat.S_IMODE(st.st_mode)
        raise ConfigError(
            f"not changing {self.path}: the file is read-only (mode {mode:04o}); "
            "make it writable (chmod u+w) to let forkdeck save settings",
            path=str(self.path),
        )


_FALLBACK_SUFFIX_RE = re.compile(r"; (using .*|entry ignored|using defaults for it)$")


def _core_reason(reason: str) -> str:
    """A problem's reason without what the loader fell back to (irrelevant when refusing)."""
    return _FALLBACK_SUFFIX_RE.sub("", reason)


def _touches(problem_key: str, changes: Mapping[str, object]) -> bool:
    """Whether a new problem is about a changed key (or a cross-field rule it feeds)."""
    related = {
        "fork.max_branches": ("fork.branches", _MODELS_KEY),
        "fork.branches": ("fork.max_branches",),
    }
    for key in changes:
        for candidate in (key, *related.get(key, ())):
            if problem_key == candidate or problem_key.startswith(candidate + "."):
                return True
            if candidate.startswith(problem_key + "."):
                return True
    return False


def _set_dotted(doc: dict[str, Any], key: str, value: object) -> bool:
    """Set (or, for None, remove) dotted ``key``; returns True when a non-table value of
    the user's had to be replaced to make room (the caller then keeps a backup)."""
    parts = key.split(".")
    replaced = False
    node = doc
    trail: list[tuple[dict[str, Any], str]] = []
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            if value is None:
                return False  # nothing to remove
            if child is not None:
                replaced = True
            child = {}
            node[part] = child
        trail.append((node, part))
        node = child
    if value is None:
        node.pop(parts[-1], None)
        # Drop tables the removal left empty, innermost first.
        for parent, name in reversed(trail):
            if parent[name]:
                break
            del parent[name]
    else:
        node[parts[-1]] = value
    return replaced


def _coerce_int(value: object, key: str, path: Path) -> int:
    if isinstance(value, bool):
        raise ConfigError(
            f"{key}: expected an integer, got {_show(value)}", key=key, path=str(path)
        )
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise ConfigError(f"{key}: expected an integer, got {_show(value)}", key=key, path=str(path))


def _coerce_float(value: object, key: str, path: Path) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().lstrip("$"))
        except ValueError:
            pass
    raise ConfigError(f"{key}: expected a number, got {_show(value)}", key=key, path=str(path))


def _coerce_bool(value: str, key: str, path: Path) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "on", "1"):
        return True
    if lowered in ("false", "no", "off", "0"):
        return False
    raise ConfigError(f"{key}: expected true or false, got {value!r}", key=key, path=str(path))


def settings_keys() -> list[str]:
    """Every dotted key this version understands (for completion and help text)."""
    return [f.key for f in _FIELDS] + [f"{_MODELS_KEY}.<slot>"]


__all__ = [
    "BACKEND_CHOICES",
    "BARE_MODEL_NAMES",
    "CONFIG_DIR",
    "CONFIG_FILE",
    "MERGE_STRATEGIES",
    "BudgetKind",
    "ConfigProblem",
    "MergeStrategyName",
    "SaveResult",
    "Settings",
    "SettingsLoad",
    "SettingsStore",
    "config_path",
    "load_settings",
    "settings_keys",
]
