"""Reading what can be read from a damaged TOML file.

Why: when ``config.toml`` has one typo and the user changes a setting, rewriting the file
with only that setting would silently throw away every other value they had (the exact
old bytes go to a backup, but nobody reads backups). So the settings writer carries over
what still parses: :func:`salvage` drops the lines the parser stumbles on, one at a time,
and keeps the rest. And since ``tomllib`` recurses once per nesting level, a hostile file
(``a=[[[[...`` 5,000 levels) raises ``RecursionError`` in the parser or in the writer:
:func:`too_deep` finds values nested beyond any sane setting without recursing itself.

Standard library only (top layer).
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

MAX_NESTING = 32
"""Deeper arrays/tables than this are refused: no setting comes close, and ``tomli_w``
recurses once per level."""

MAX_SALVAGE_PASSES = 500

_LINE_RE = re.compile(r"\(at line (\d+), column \d+\)")


def parse(text: str) -> dict[str, Any]:
    """``tomllib.loads`` that reports runaway nesting as a decode error (never recursion)."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError("arrays or tables nested too deeply to read") from None


def too_deep(doc: dict[str, Any], limit: int = MAX_NESTING) -> list[str]:
    """Dotted top-level paths (``table.key``) whose value nests deeper than ``limit``.

    Iterative (an explicit stack), so it works on any depth the parser produced.
    """
    bad: list[str] = []
    for name, value in doc.items():
        entries = list(value.items()) if isinstance(value, dict) else [(None, value)]
        for sub, child in entries:
            key = name if sub is None else f"{name}.{sub}"
            stack: list[tuple[Any, int]] = [(child, 1)]
            while stack:
                node, depth = stack.pop()
                if depth > limit:
                    bad.append(key)
                    break
                if isinstance(node, dict):
                    stack.extend((v, depth + 1) for v in node.values())
                elif isinstance(node, list):
                    stack.extend((v, depth + 1) for v in node)
    return bad


def drop_keys(doc: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """``doc`` without the dotted ``keys`` (one or two levels, as :func:`too_deep` names)."""
    out = dict(doc)
    for key in keys:
        name, _, sub = key.partition(".")
        if sub and isinstance(out.get(name), dict):
            out[name] = {k: v for k, v in out[name].items() if k != sub}
        else:
            out.pop(name, None)
    return out


def _error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    match = _LINE_RE.search(str(exc))
    return int(match.group(1)) if match else None


def _is_header(line: str) -> bool:
    return line.lstrip().startswith("[")


def salvage(text: str) -> tuple[dict[str, Any], list[int]]:
    """The document that remains when the lines the parser rejects are removed, and the
    1-based numbers of the removed lines.

    A rejected table header takes its body with it (up to the next header): its keys would
    otherwise land in the table above. An error the parser places at the end of the file
    (an unclosed string or array) removes the last remaining line, until what opened it is
    gone. Gives up (an empty document, every line listed) after
    :data:`MAX_SALVAGE_PASSES` attempts.
    """
    lines = text.splitlines()
    dropped: set[int] = set()
    for _ in range(MAX_SALVAGE_PASSES):
        try:
            doc = tomllib.loads("\n".join(lines))
        except RecursionError:
            line = _deepest_line(lines)
        except tomllib.TOMLDecodeError as exc:
            line = _error_line(exc)
        else:
            return doc, sorted(dropped)
        index = _line_to_drop(lines, line)
        if index is None:
            break
        header = _is_header(lines[index])
        lines[index] = ""
        dropped.add(index + 1)
        if header:
            for following in range(index + 1, len(lines)):
                if _is_header(lines[following]):
                    break
                if lines[following].strip():
                    lines[following] = ""
                    dropped.add(following + 1)
    return {}, [n for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def _line_to_drop(lines: list[str], reported: int | None) -> int | None:
    """The 0-based line to remove: the reported one, or the last non-blank line at or
    before it (errors at the end of the file point past everything)."""
    start = len(lines) - 1 if reported is None else min(reported - 1, len(lines) - 1)
    for index in range(start, -1, -1):
        if lines[index].strip():
            return index
    return None


def _deepest_line(lines: list[str]) -> int:
    """1-based line opening the most brackets: where runaway nesting most likely sits."""
    best = max(range(len(lines)), key=lambda i: lines[i].count("[") + lines[i].count("{"))
    return best + 1


__all__ = ["MAX_NESTING", "drop_keys", "parse", "salvage", "too_deep"]
