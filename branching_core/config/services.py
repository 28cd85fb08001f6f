"""``[services.<name>]``: the services every branch may run (see docs/network.md).

Each table needs ``command``; ``port`` (1-65535), ``ready`` (``tcp``, ``http``,
``http:/path`` or ``none``; a probe other than ``none`` needs a port), ``env`` (a table of
strings), ``autostart``, ``stop_signal`` (``TERM``, ``INT``...), ``stop_timeout`` and
``ready_timeout`` (seconds) are optional. A bad table is reported with its key and
skipped; the other services stay usable.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Mapping
from typing import Any

from branching_core.config.schema import ServiceConfig
from branching_core.errors import BranchingError

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEYS = ("command", "port", "ready", "env", "autostart", "stop_signal", "stop_timeout",
         "ready_timeout")


class _Bad(BranchingError):
    pass


def _ready(value: object) -> str:
    if not isinstance(value, str) or not (value in ("tcp", "http", "none")
                                          or re.fullmatch(r"http:/\S*", value)):
        raise _Bad(f"ready must be tcp, http, http:/path or none, got {value!r}")
    return value


def _seconds(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
        raise _Bad(f"{key} must be a number of seconds between 0 and 3600, got {value!r}")
    return float(value)


def _signal(value: object) -> str:
    text = str(value).strip().upper()
    name = text if text.startswith("SIG") else "SIG" + text
    if not isinstance(value, str) or name not in signal.Signals.__members__:
        raise _Bad(f"stop_signal must name a signal (TERM, INT, QUIT...), got {value!r}")
    return text


def _one(name: str, raw: Mapping[str, Any]) -> ServiceConfig:
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise _Bad(f"unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
    command = raw.get("command")
    if not isinstance(command, str) or not command.strip() or "\n" in command:
        raise _Bad("command must be a one-line string")
    port = raw.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)
                             or not 0 < port < 65536):
        raise _Bad(f"port must be an integer 1-65535, got {port!r}")
    ready = _ready(raw.get("ready", "tcp" if port is not None else "none"))
    if ready != "none" and port is None:
        raise _Bad(f"a {ready} readiness probe needs a port")
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in env.items()):
        raise _Bad("env must be a table of strings")
    autostart = raw.get("autostart", False)
    if not isinstance(autostart, bool):
        raise _Bad(f"autostart must be true or false, got {autostart!r}")
    return ServiceConfig(
        command=command, port=port, ready=ready, env=dict(env), autostart=autostart,
        stop_signal=_signal(raw.get("stop_signal", "TERM")),
        stop_timeout=_seconds("stop_timeout", raw.get("stop_timeout", 10.0)),
        ready_timeout=_seconds("ready_timeout", raw.get("ready_timeout", 60.0)),
    )


def parse_services(table: Mapping[str, Any],
                   problem: Callable[[str, str], None]) -> dict[str, ServiceConfig]:
    """The valid services of ``[services]``; each bad one is reported and skipped."""
    out: dict[str, ServiceConfig] = {}
    for name, raw in table.items():
        key = f"services.{name}"
        if not _NAME_RE.match(name):
            problem(key, "a service name is letters, digits, '_', '.', '-'; ignored")
            continue
        if not isinstance(raw, dict):
            problem(key, "expected a table with at least command; ignored")
            continue
        try:
            out[name] = _one(name, raw)
        except _Bad as exc:
            problem(key, f"{exc}; service ignored")
    return out


__all__ = ["parse_services"]
