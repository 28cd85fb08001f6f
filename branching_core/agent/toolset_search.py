"""The ``glob`` and ``grep`` tools of :class:`~branching_core.agent.toolset.WorkspaceToolset`,
and the bounded file reading they share with ``read_file``.

A mixin, split from ``toolset.py`` to keep each module to one job: this one walks the
tree (never following symlinked directories, skipping ``.git`` and project state) and
searches it under a :class:`~branching_core.agent.search.Deadline`, saying which files it
did not look at so "no matches" is never a silent lie. The tools keep the toolset's error
policy: a call that cannot be done raises ``ToolFailed``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic_ai import ToolFailed

from branching_core.agent.paths import (
    HIDDEN_NAMES,
    UnsafePathError,
    relative_to_root,
    resolve_in_root,
)
from branching_core.agent.search import (
    Deadline,
    InvalidPatternError,
    LineSearch,
    SearchTimeoutError,
    glob_to_regex,
)
from branching_core.agent.tool_guard import guard_tool

WALK_SKIP: frozenset[str] = HIDDEN_NAMES | {".git"}
"""Directory names that ``glob`` and ``grep`` never descend into (``.git`` is noise for a model)."""

MAX_GREP_FILE_BYTES = 5 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192
MAX_GREP_MATCHES = 200
MAX_GREP_COUNTED = 10_000
MAX_GREP_LINE_CHARS = 300
MAX_LISTED = 1000
MAX_SKIPPED_NAMED = 5

def _fail(message: str) -> ToolFailed:
    return ToolFailed(message)


def _is_binary(sample: bytes) -> bool:
    return b"\x00" in sample[:BINARY_SNIFF_BYTES]


def _read_fd(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd`` (a file that grew since its fstat is cut there)."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _file_kind(mode: int) -> str:
    """What a non-regular file is, in words a model understands."""
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a special file"


def _skipped_note(too_large: list[str], unreadable: list[str]) -> str:
    """Say which files a search did not look at, so "no matches" is never a silent lie."""
    notes: list[str] = []
    for files, why in (
        (too_large, f"over {MAX_GREP_FILE_BYTES // (1024 * 1024)} MB"),
        (unreadable, "unreadable"),
    ):
        if not files:
            continue
        names = ", ".join(files[:MAX_SKIPPED_NAMED])
        extra = len(files) - MAX_SKIPPED_NAMED
        more = f" and {extra} more" if extra > 0 else ""
        plural = "s" if len(files) > 1 else ""
        notes.append(f"{len(files)} file{plural} {why}: {names}{more}")
    if not notes:
        return ""
    return "[not searched: " + "; ".join(notes) + "; use run_command with grep for those]"


class SearchTools:
    """``glob`` and ``grep`` over ``root`` (mixed into ``WorkspaceToolset``, which sets
    ``root`` and ``search_timeout`` and registers the two tools)."""

    root: Path
    search_timeout: float

    def _rel(self, path: Path) -> str:
        return relative_to_root(self.root, path)

    def _walk(
        self, start: Path, deadline: Deadline | None = None
    ) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """Yield ``(relative path, entry)`` under ``start``, never following symlinked dirs;
        with a ``deadline``, stop (:class:`SearchTimeoutError`) when it passes."""
        stack = [start]
        while stack:
            if deadline is not None:
                deadline.remaining()
            directory = stack.pop()
            try:
                with os.scandir(directory) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            subdirs: list[Path] = []
            for entry in entries:
                if entry.name in WALK_SKIP:
                    continue
                rel = self._rel(Path(entry.path))
                yield rel, entry
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(Path(entry.path))
            stack.extend(reversed(subdirs))

    # -- tools ---------------------------------------------------------------------------

    @guard_tool
    def glob(self, pattern: str) -> str:
        """Find files and directories whose path matches a glob pattern.

        '*' matches within one path component and '**' across directories: 'src/**/*.py'
        finds Python files anywhere under src, '*.py' only at the top level.

        Args:
            pattern: Glob pattern relative to the workspace root.
        """
        if not pattern:
            raise _fail("the pattern is empty; try '**/*' for every path")
        if "\x00" in pattern:
            raise _fail("the pattern contains a NUL byte")
        if pattern.startswith("/"):
            raise _fail("the pattern must be relative to the workspace root")
        if ".." in pattern.split("/"):
            raise _fail("'..' is not allowed in a glob pattern")
        if pattern.startswith("./"):
            pattern = pattern[2:]
        regex = self._compile_glob(pattern)
        deadline = Deadline(self.search_timeout)
        matches: list[str] = []
        try:
            for rel, entry in self._walk(self._walk_start(pattern), deadline):
                if deadline.fullmatch(regex, rel):
                    matches.append(rel + "/" if entry.is_dir(follow_symlinks=False) else rel)
        except SearchTimeoutError as exc:
            raise _fail(
                f"glob stopped: {exc} ({len(matches)} matches by then); use a simpler "
                "pattern or a literal directory prefix"
            ) from None
        if not matches:
            return f"no paths match {pattern!r}"
        matches.sort()
        shown = matches[:MAX_LISTED]
        if len(matches) > MAX_LISTED:
            shown.append(f"... and {len(matches) - MAX_LISTED} more")
        return "\n".join(shown)

    @staticmethod
    def _compile_glob(pattern: str) -> Any:
        try:
            return glob_to_regex(pattern)
        except InvalidPatternError as exc:
            raise _fail(str(exc)) from None

    def _walk_start(self, pattern: str) -> Path:
        """The deepest literal directory prefix of ``pattern`` (to avoid walking the whole tree)."""
        literal: list[str] = []
        for part in [p for p in pattern.split("/") if p not in ("", ".")][:-1]:
            if any(ch in part for ch in "*?["):
                break
            literal.append(part)
        if not literal:
            return self.root
        start = Path(self.root, *literal)
        try:
            # only a real directory reached without symlinks; otherwise walk from the root
            if resolve_in_root(self.root, "/".join(literal)) == start and start.is_dir():
                return start
        except UnsafePathError:
            pass
        return self.root

    @guard_tool
    def grep(self, pattern: str, path_glob: str | None = None) -> str:
        """Search text files for a regular expression (binary files are skipped).

        Args:
            pattern: Python regular expression searched in each line.
            path_glob: Only search files matching this glob; without '/', it matches file
                names anywhere ('*.py'), with '/' the whole relative path ('src/**/*.py').
        """
        try:
            search = LineSearch(pattern)
        except InvalidPatternError as exc:
            raise _fail(str(exc)) from None
        path_regex = self._compile_glob(path_glob) if path_glob else None
        by_name = bool(path_glob) and "/" not in (path_glob or "")
        deadline = Deadline(self.search_timeout)
        out: list[str] = []
        total = 0
        too_large: list[str] = []
        unreadable: list[str] = []
        try:
            for rel, entry in self._walk(self.root, deadline):
                if not entry.is_file(follow_symlinks=False):
                    continue
                subject = entry.name if by_name else rel
                if path_regex is not None and not deadline.fullmatch(path_regex, subject):
                    continue
                data = self._grep_read(entry, rel, too_large, unreadable)
                if data is None or _is_binary(data):
                    continue
                lines = data.decode("utf-8", errors="replace").splitlines()
                if total >= MAX_GREP_COUNTED:
                    break  # enough to say "narrow the pattern"; counting more costs time
                for index in search.matching_lines(lines, deadline, MAX_GREP_COUNTED - total):
                    total += 1
                    if len(out) < MAX_GREP_MATCHES:
                        line = lines[index]
                        if len(line) > MAX_GREP_LINE_CHARS:
                            line = line[:MAX_GREP_LINE_CHARS] + "..."
                        out.append(f"{rel}:{index + 1}: {line}")
        except SearchTimeoutError as exc:
            raise _fail(
                f"grep stopped: {exc} ({total} matches by then); the pattern may backtrack "
                "catastrophically (nested quantifiers such as (a+)+): simplify it, or narrow "
                "path_glob"
            ) from None
        skipped = _skipped_note(too_large, unreadable)
        if not out:
            return f"no matches for {pattern!r}" + (f"\n{skipped}" if skipped else "")
        if total >= MAX_GREP_COUNTED:
            out.append(
                f"... at least {total - len(out)} more matches not shown (counting stopped at "
                f"{MAX_GREP_COUNTED}); narrow the pattern"
            )
        elif total > len(out):
            out.append(f"... {total - len(out)} more matches not shown; narrow the pattern")
        if skipped:
            out.append(skipped)
        return "\n".join(out)

    @staticmethod
    def _grep_read(
        entry: os.DirEntry[str], rel: str, too_large: list[str], unreadable: list[str]
    ) -> bytes | None:
        """A regular file's bytes, or None (noted in ``too_large``/``unreadable``)."""
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            unreadable.append(rel)
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None  # swapped for a FIFO or device since the walk saw it
            if st.st_size > MAX_GREP_FILE_BYTES:
                too_large.append(rel)
                return None
            return _read_fd(fd, MAX_GREP_FILE_BYTES)
        except OSError:
            unreadable.append(rel)
            return None
        finally:
            os.close(fd)



__all__ = ["MAX_GREP_FILE_BYTES", "MAX_LISTED", "WALK_SKIP", "SearchTools"]
