"""Bounded output capture: the head and the tail of a stream, and how much was dropped.

A sandboxed command may print without end (``yes``, a runaway log loop). Keeping all
of it in the caller turned one ``yes`` into gigabytes of caller memory, so every
captured stream (stdout, stderr, extra fds) keeps at most ``limit`` bytes: the first
half and the last half, with a count of the bytes in between that were dropped. The
beginning (what the command set out to do) and the end (how it finished, the score
line, the failure summary) are what a reader needs; ``on_output`` still sees every
line as it arrives, so a caller that wants everything streams it to a file.

Line assembly for ``on_output`` is bounded too: a "line" longer than
``MAX_LINE_BYTES`` (``cat /dev/zero``) is delivered in pieces of that size.
"""

from __future__ import annotations

from collections.abc import Callable

from branching_core.errors import InvalidArgumentError

DEFAULT_MAX_OUTPUT = 8 << 20
"""Bytes kept per captured stream by default (4 MiB head + 4 MiB tail)."""

MAX_LINE_BYTES = 1 << 20
"""The longest piece ``on_output`` receives; longer lines arrive in pieces of this size."""


def check_max_output(value: object) -> int:
    """``value`` as a positive byte count, or ``ValueError`` (bool, float and <= 0 refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise InvalidArgumentError(f"max_output must be an int of at least 2 bytes, got {value!r}")
    return value


def dropped_marker(dropped: int) -> str:
    """The line put where the middle of a long output was dropped."""
    return f"\n... [{dropped} bytes of output dropped] ...\n"


class BoundedCapture:
    """The first ``limit // 2`` bytes of a stream, its last bytes, and the dropped count."""

    def __init__(self, limit: int = DEFAULT_MAX_OUTPUT) -> None:
        self.limit = check_max_output(limit)
        self._head_cap = limit // 2
        self._tail_cap = limit - self._head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    @property
    def dropped(self) -> int:
        """Bytes received but no longer held (the middle of the stream)."""
        return self.total - len(self.head) - len(self.tail)

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
            if not data:
                return
        self.tail += data
        excess = len(self.tail) - self._tail_cap
        if excess > 0:
            del self.tail[:excess]  # O(1) amortised: bytearray trims its front in place

    def getvalue(self) -> bytes:
        """Head and tail; when bytes were dropped, a marker line says how many, between them."""
        if not self.dropped:
            return bytes(self.head + self.tail)
        return bytes(self.head) + dropped_marker(self.dropped).encode() + bytes(self.tail)

    def text(self) -> str:
        """``getvalue()`` decoded; head and tail decode separately (a cut may split a char)."""
        if not self.dropped:
            return (self.head + self.tail).decode("utf-8", "replace")
        return (self.head.decode("utf-8", "replace") + dropped_marker(self.dropped)
                + self.tail.decode("utf-8", "replace"))


class LineSplitter:
    """Cut a byte stream into lines for ``emit(line)``; holds at most one partial line."""

    def __init__(self, emit: Callable[[str], None], max_line: int = MAX_LINE_BYTES) -> None:
        self._emit = emit
        self._max = max_line
        self._pending = bytearray()

    def feed(self, data: bytes) -> None:
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            if self._pending:
                self._pending += data[start:nl]
                line, self._pending = bytes(self._pending), bytearray()
            else:
                line = data[start:nl]
            self._emit_long(line)
            start = nl + 1
        self._pending += data[start:]
        while len(self._pending) > self._max:
            cut = _char_boundary(self._pending, self._max)
            piece = bytes(self._pending[:cut])
            del self._pending[:cut]
            self._emit(piece.decode("utf-8", "replace"))

    def _emit_long(self, line: bytes) -> None:
        while len(line) > self._max:
            cut = _char_boundary(line, self._max)
            self._emit(line[:cut].decode("utf-8", "replace"))
            line = line[cut:]
        self._emit(line.decode("utf-8", "replace"))

    def close(self) -> None:
        """Emit the last unterminated piece, if any."""
        if self._pending:
            line, self._pending = bytes(self._pending), bytearray()
            self._emit(line.decode("utf-8", "replace"))


def _char_boundary(data: bytes | bytearray, cut: int) -> int:
    """Move ``cut`` back (at most 3 bytes) so it does not split a UTF-8 sequence."""
    for back in range(4):
        pos = cut - back
        if pos <= 0:
            break
        if data[pos] & 0xC0 != 0x80:
            return pos
    return cut


__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "MAX_LINE_BYTES",
    "BoundedCapture",
    "LineSplitter",
    "check_max_output",
    "dropped_marker",
]
