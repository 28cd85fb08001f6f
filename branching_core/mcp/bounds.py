"""Sizes a tool accepts and returns, and the checks that turn bad arguments into one line.

Why a module of its own: every tool result goes back into a model's context window, so
each text field is cut to a fixed budget (head and tail kept, a note saying how much was
cut), and every argument a model (or a hostile client) sends is checked here before any
engine call, so a bad label, path or command changes nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from mcp.server.mcpserver.exceptions import ToolError

MAX_OUTPUT_CHARS = 16_000
"""Per stream (stdout, stderr) of ``branch_run``."""
MAX_DIFF_CHARS = 60_000
"""The unified diff of ``branch_diff`` (and of the diff resource)."""
MAX_FILE_BYTES = 1 << 20
"""Files larger than this are reported as changed without a line diff."""
MAX_LISTED_PATHS = 1_000
"""Changed paths listed by ``branch_diff`` before the list is cut."""
MAX_COMMAND_BYTES = 64 * 1024
MAX_CANDIDATES = 16
MAX_TIMEOUT_S = 24 * 3600.0
STATE_DIR = ".pydantic-deep"

_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` within ``limit`` characters: its head and tail around a marker saying how
    many characters were left out (the end of a log is usually what matters), and whether
    anything was cut."""
    if len(text) <= limit:
        return text, False
    keep = max(limit - 80, 0)
    head, tail = keep // 2, keep - keep // 2
    dropped = len(text) - head - tail
    marker = f"\n[... {dropped} characters cut by forkdeck ...]\n"
    return text[:head] + marker + (text[-tail:] if tail else ""), True


def one_line(message: object) -> str:
    """A message as one line (tool errors are read by models and shown in UIs)."""
    text = " ".join(str(message).split())
    return text[:500] + " ..." if len(text) > 500 else text


def check_label(label: object, what: str = "label") -> str:
    """A branch label: 1-64 of letters, digits, ``._-``, starting with a letter or digit,
    no ``..``. Labels become branch names (one path component) and resource URIs."""
    if not isinstance(label, str) or not label:
        raise ToolError(f"{what} must be a non-empty string")
    if "\x00" in label:
        raise ToolError(f"{what} {label!r} contains a NUL byte")
    if "/" in label or "\\" in label:
        raise ToolError(f"{what} {label!r} contains a path separator")
    if ".." in label:
        raise ToolError(f"{what} {label!r} contains '..'")
    if not _LABEL.fullmatch(label):
        raise ToolError(
            f"{what} {label[:80]!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return label


def check_command(command: object, what: str = "command") -> str:
    if not isinstance(command, str) or not command.strip():
        raise ToolError(f"{what} must be a non-empty shell command line")
    if "\x00" in command:
        raise ToolError(f"{what} contains a NUL byte")
    size = len(command.encode("utf-8", "surrogatepass"))
    if size > MAX_COMMAND_BYTES:
        raise ToolError(
            f"{what} is {size} bytes; the limit is {MAX_COMMAND_BYTES} "
            "(write a script file at the branch path and run that)"
        )
    return command


def check_timeout(timeout_s: float | None, default: float) -> float:
    if timeout_s is None:
        return default
    if not isinstance(timeout_s, int | float) or not timeout_s > 0 or timeout_s > MAX_TIMEOUT_S:
        raise ToolError(f"timeout_s must be between 0 and {MAX_TIMEOUT_S:.0f} seconds")
    return float(timeout_s)


def relative_path(path: object, roots: list[Path]) -> str:
    """``path`` as a clean POSIX path relative to the branch.

    Accepts a relative path or an absolute one below any of ``roots`` (the branch's own
    path, or the workspace's path as commands in the branch see it). Anything else, any
    ``..`` component, a NUL byte, or the project's state directory is refused.
    """
    if not isinstance(path, str) or not path:
        raise ToolError("paths must be non-empty strings")
    if "\x00" in path:
        raise ToolError(f"path {path!r} contains a NUL byte")
    raw = PurePosixPath(path)
    if raw.is_absolute():
        for root in roots:
            try:
                raw = PurePosixPath(os.path.normpath(path)).relative_to(str(root))
                break
            except ValueError:
                continue
        else:
            raise ToolError(f"path {path} is outside the branch")
    if any(part == ".." for part in raw.parts):
        raise ToolError(f"path {path} escapes the branch ('..')")
    clean = PurePosixPath(*[p for p in raw.parts if p not in ("", ".")])
    if not clean.parts:
        return ""
    if clean.parts[0] == STATE_DIR:
        raise ToolError(f"path {path} is forkdeck's state directory, not branch content")
    return str(clean)


__all__ = [
    "MAX_CANDIDATES",
    "MAX_COMMAND_BYTES",
    "MAX_DIFF_CHARS",
    "MAX_OUTPUT_CHARS",
    "check_command",
    "check_label",
    "check_timeout",
    "cut",
    "one_line",
    "relative_path",
]
