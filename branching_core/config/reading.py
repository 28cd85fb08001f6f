"""Reading ``config.toml`` forgivingly: :func:`load_settings` never writes, and a bad value
falls back to its default for that key only, reported as a ``ConfigProblem`` with its line.

Part of :mod:`branching_core.config` (see its docstring for the file format).
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branching_core import toml_salvage
from branching_core.config.schema import (
    _BY_KEY,
    _DEFAULTS,
    _MODELS_KEY,
    _PRICES_KEY,
    _SERVICES_TABLE,
    _TABLES,
    _TOML_POS_RE,
    AGENTS_TABLE,
    CONFIG_DIR,
    CONFIG_FILE,
    ConfigProblem,
    Settings,
    SettingsLoad,
    _Invalid,
    _model_name,
    _number,
    _show,
    _text,
    agent_profiles,
)
from branching_core.config.services import parse_services
from branching_core.errors import SystemCallError
from branching_core.state_dir import escape_target

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
            raise SystemCallError(f"not a regular file (mode {stat.filemode(st.st_mode)})")
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
        elif name == AGENTS_TABLE:
            values["agents"] = agent_profiles(value, problem)
        else:
            problem(name, "unknown setting (kept, but ignored)")

    services_table = tables.pop(_SERVICES_TABLE, None)
    if services_table is not None:
        values["services"] = parse_services(services_table, problem)
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
