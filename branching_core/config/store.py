"""Writing ``config.toml`` carefully: :class:`SettingsStore` validates first, re-reads, changes
one key and writes atomically, backing up text it cannot keep (broken files, comments).

Part of :mod:`branching_core.config` (see its docstring for the file format).
"""

from __future__ import annotations

import copy
import os
import re
import stat
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomli_w

from branching_core import toml_salvage
from branching_core.atomicio import atomic_write
from branching_core.config.reading import (
    _escape_reason,
    _read_raw,
    _validate,
    config_path,
    load_settings,
)
from branching_core.config.schema import (
    _BY_ATTR,
    _BY_KEY,
    _FIELDS,
    _HEADER,
    _MODELS_KEY,
    _PAST_HEADER_LINES,
    _TABLES,
    BudgetKind,
    ConfigProblem,
    SaveResult,
    Settings,
    SettingsLoad,
    _boolean,
    _fraction,
    _Invalid,
    _model_name,
    _positive,
    _show,
)
from branching_core.errors import ConfigError
from branching_core.state_dir import ensure_gitignore

# --------------------------------------------------------------------------- writing


def _user_comments(text: str) -> bool:
    """True when the file holds full-line comments other than the header we write."""
    ours = set(_HEADER.splitlines()) | _PAST_HEADER_LINES
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
