# pyright: strict
"""The record format of the sandbox protocol (``_spawn``'s docstring): a tag byte, then
length-prefixed parts, written by the init (or the native executor) on the result pipe
and parsed by the caller; after a result or exit record the Python init may add an end
record (``write_end``). Only ``os`` and ``struct`` run here: the writers run between
fork and exec, where no lock may be touched."""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING

from branching_core.errors import (
    InvalidArgumentError,
)

if TYPE_CHECKING:  # (cgroups only for annotations)
    pass


TAG_SETUP = b"S"  # setup failed: kind \0 message
TAG_RESULT = b"R"  # callable finished: meta pickle + payload pickle
TAG_EXIT = b"X"  # command finished: raw wait status of the command
TAG_END = b"E"  # after R (or X): the init's exit code; nothing else of the branch runs
_PARTS = {TAG_SETUP: 2, TAG_RESULT: 2, TAG_EXIT: 1}  # parts of each record an E may follow
_END_SIZE = 1 + 8 + 4


def _write_all(fd: int, chunk: bytes) -> None:
    """One ``os.write`` loop over partial writes and EINTR (both record writers use it)."""
    view = memoryview(chunk)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[n:]


# A record up to this size goes out in one ``write``: each write wakes the caller's
# drain, and on a busy machine every wake-up can preempt the writer (a result record
# written in five pieces cost the candidate up to five switches).
ONE_WRITE = 1 << 16


def _joined(tag: bytes, parts: tuple[bytes, ...]) -> bytes:
    return b"".join((tag, *(struct.pack("<Q", len(p)) + p for p in parts)))


def write_record(fd: int, tag: bytes, *parts: bytes) -> None:
    """Write ``tag`` then each part length-prefixed, in one ``write`` (and a loop over
    partial writes)."""
    _write_all(fd, _joined(tag, parts))


def write_large_record(fd: int, tag: bytes, *parts: bytes) -> None:
    """Like ``write_record``; a big record (over ``ONE_WRITE``) is written part by
    part, without building a joined copy of its payloads."""
    if sum(len(p) for p in parts) + 9 * len(parts) < ONE_WRITE:
        _write_all(fd, _joined(tag, parts))
        return
    _write_all(fd, tag)
    for part in parts:
        _write_all(fd, struct.pack("<Q", len(part)))
        _write_all(fd, part)


def parse_record(data: bytes) -> tuple[bytes, list[bytes]]:
    """Split a record into its tag and parts (raises ValueError when truncated)."""
    if not data:
        raise InvalidArgumentError("empty")
    tag, pos = data[:1], 1
    parts: list[bytes] = []
    while pos < len(data):
        if pos + 8 > len(data):
            raise InvalidArgumentError("truncated length")
        (size,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        if pos + size > len(data):
            raise InvalidArgumentError("truncated part")
        parts.append(data[pos:pos + size])
        pos += size
    return tag, parts


def write_end(fd: int, code: int) -> None:
    """The init's last word: every other process of its pid namespace is dead and
    reaped, it holds no fd but the result pipe, it runs one thread, and it exits with
    ``code`` next (``_child.end_branch``)."""
    write_record(fd, TAG_END, struct.pack("<i", code))


def might_end(data: bytes | bytearray) -> bool:
    """Whether ``data`` ends like an end record (cheap: ``split_end`` decides)."""
    return (len(data) > _END_SIZE and data[-_END_SIZE] == TAG_END[0]
            and data[-_END_SIZE + 1:-4] == struct.pack("<Q", 4))


def split_end(data: bytes) -> tuple[bytes, int | None]:
    """``data`` without a trailing end record, and the code it carries (None: none).

    An end record counts only right after one whole record of a known kind: the bytes
    are parsed from the front, never guessed from the tail."""
    if not might_end(data):
        return data, None
    count = _PARTS.get(data[:1])
    if count is None:
        return data, None
    pos = 1
    for _ in range(count):
        if pos + 8 > len(data):
            return data, None
        (size,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + size
    if pos + _END_SIZE != len(data):
        return data, None
    (code,) = struct.unpack_from("<i", data, pos + 9)
    return data[:pos], code


def is_exit_record(data: bytes | bytearray) -> bool:
    try:
        tag, parts = parse_record(bytes(data))
    except ValueError:
        return False
    return tag == TAG_EXIT and len(parts) == 1

