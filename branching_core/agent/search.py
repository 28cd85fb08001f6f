"""Bounded pattern matching for the ``glob`` and ``grep`` tools.

Why not the standard ``re``: a model (or a hostile prompt) can hand ``grep`` a pattern that
backtracks catastrophically (``^(a+)+$`` on a 26-character line). ``re`` then holds the GIL
for the whole search, so every thread of the process -- the TUI's event loop included --
freezes, and nothing can stop it. The third-party ``regex`` engine (Python-``re``
compatible in its default V0 mode) releases the GIL while it matches a ``str`` and takes a
``timeout``, so a search here shares the CPU with the rest of the process and ends, with a
clear error, when its :class:`Deadline` passes. Glob patterns go through the same engine:
``*a*a*a*a*b`` backtracks polynomially too.
"""

from __future__ import annotations

import bisect
import itertools
import time

import regex

from branching_core.errors import BranchingError

DEFAULT_SEARCH_TIMEOUT_S = 20.0
"""How long one ``glob`` or ``grep`` call may match before it is stopped."""


class InvalidPatternError(BranchingError, ValueError):
    """A glob or regular expression that cannot be compiled; the message says why."""


class SearchTimeoutError(BranchingError, TimeoutError):
    """A search ran past its :class:`Deadline` (a backtracking pattern or a huge tree)."""


class Deadline:
    """One search's time budget, shared by every match call the search makes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left; raises :class:`SearchTimeoutError` once none are."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise SearchTimeoutError(f"the search took longer than {self.seconds:g}s")
        return left

    def search(self, pattern: regex.Pattern[str], text: str) -> bool:
        """Whether ``pattern`` occurs in ``text``, giving up (GIL released meanwhile) at the
        deadline."""
        try:
            return pattern.search(text, timeout=self.remaining()) is not None
        except TimeoutError:
            raise SearchTimeoutError(f"the search took longer than {self.seconds:g}s") from None

    def fullmatch(self, pattern: regex.Pattern[str], text: str) -> bool:
        """Whether ``pattern`` matches all of ``text``, bounded like :meth:`search`."""
        try:
            return pattern.match(text, timeout=self.remaining()) is not None
        except TimeoutError:
            raise SearchTimeoutError(f"the search took longer than {self.seconds:g}s") from None


class LineSearch:
    """A regular expression searched line by line, as ``grep`` does, fast.

    A ``timeout`` costs ~6 µs per match call, ten times a search of a short line, so
    calling the engine once per line made ``grep`` 10x slower than ``re``. Instead the
    whole file is searched once (MULTILINE, one timeout), and the lines its matches touch
    are the candidates. That is exact, not a heuristic: a line that matches on its own also
    matches inside the text (``^``, ``$`` and ``\\b`` behave the same at a line's edges),
    and a match found inside one line is a match of that line alone. Only a match that
    spans lines is checked again line by line. Patterns whose meaning depends on what lies
    beyond the line (lookarounds, ``\\A``, ``\\Z``) take the line-by-line path.
    """

    _LINE_SENSITIVE = ("(?=", "(?!", "(?<=", "(?<!", "\\A", "\\Z", "\\z", "\\G")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.line_regex = compile_regex(pattern)
        self.text_regex: regex.Pattern[str] | None = None
        if not any(token in pattern for token in self._LINE_SENSITIVE):
            self.text_regex = compile_regex(pattern, regex.MULTILINE)

    def matching_lines(
        self, lines: list[str], deadline: Deadline, limit: int | None = None
    ) -> list[int]:
        """0-based indexes of the lines the pattern matches, in order; with ``limit``, the
        search may stop once about that many are found (a pattern matching everything)."""
        if self.text_regex is None:
            found: list[int] = []
            for i, line in enumerate(lines):
                if limit is not None and len(found) >= limit:
                    break
                if deadline.search(self.line_regex, line):
                    found.append(i)
            return found
        text = "\n".join(lines)
        starts = [0, *itertools.accumulate(len(line) + 1 for line in lines)][:-1]
        sure: set[int] = set()
        maybe: set[int] = set()
        try:
            for match in self.text_regex.finditer(text, timeout=deadline.remaining()):
                first = bisect.bisect_right(starts, match.start()) - 1
                # a match that consumed a line's "\n" ends at the next line's start: it spans
                last = bisect.bisect_right(starts, match.end()) - 1
                if first == last:
                    sure.add(first)
                else:
                    maybe.update(range(first, last + 1))
                if limit is not None and len(sure) + len(maybe) >= limit:
                    break
        except TimeoutError:
            raise SearchTimeoutError(f"the search took longer than {deadline.seconds:g}s") from None
        checked = {i for i in maybe - sure if deadline.search(self.line_regex, lines[i])}
        return sorted(sure | checked)


def compile_regex(pattern: str, flags: int = 0) -> regex.Pattern[str]:
    """Compile a model's regular expression (Python ``re`` syntax)."""
    try:
        return regex.compile(pattern, regex.VERSION0 | flags)
    except (regex.error, ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise InvalidPatternError(f"invalid regular expression {pattern!r}: {exc}") from None


_CLASS_ESCAPES = {"\\": "\\\\", "[": "\\[", "&": "\\&", "~": "\\~", "|": "\\|"}


def glob_to_regex(pattern: str) -> regex.Pattern[str]:
    """Translate a glob to a pattern over ``/``-separated relative paths (match to the end).

    ``*`` and ``?`` stay within one path component, ``**`` spans components (``a/**/b``
    also matches ``a/b``), ``[...]`` is a character class (``[!...]`` negated). Python
    3.11 has no ``glob.translate``, hence this. A class that cannot be compiled (``[z-a]``)
    raises :class:`InvalidPatternError`.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if pattern.startswith("/", i):
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern.startswith("[!", i) else i + 1)
            if end == -1:
                out.append(regex.escape(c))
            else:
                body = pattern[i + 1 : end]
                negate = body.startswith("!")
                if negate:
                    body = body[1:]
                body = "".join(_CLASS_ESCAPES.get(ch, ch) for ch in body)
                out.append(f"[{'^' if negate else ''}{body}]")
                i = end
        else:
            out.append(regex.escape(c))
        i += 1
    try:
        return regex.compile("".join(out) + r"\Z", regex.VERSION0 | regex.DOTALL)
    except (regex.error, ValueError, OverflowError, RecursionError) as exc:
        raise InvalidPatternError(f"invalid glob pattern {pattern!r}: {exc}") from None


__all__ = [
    "DEFAULT_SEARCH_TIMEOUT_S",
    "Deadline",
    "InvalidPatternError",
    "LineSearch",
    "SearchTimeoutError",
    "compile_regex",
    "glob_to_regex",
]
