"""The record format of the sandbox protocol (``_spawn``'s docstring): a tag byte, then
length-prefixed parts, written by the init (or the native executor) on the result pipe
and parsed by the caller. Only ``os`` and ``struct`` run here: the writers run between
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


def write_record(fd: int, tag: bytes, *parts: bytes) -> None:
    """Write ``tag`` then each part length-prefixed; loops over partial writes."""
    for chunk in (tag, *(struct.pack("<Q", len(p)) + p for p in parts)):
        view = memoryview(chunk)
        while view:
            try:
                n = os.write(fd, view)
            except InterruptedError:
                continue
            view = view[n:]


def write_large_record(fd: int, tag: bytes, *parts: bytes) -> None:
    """Like ``write_record`` without building a joined copy of big payloads."""
    write_record(fd, tag)
    for part in parts:
        for chunk in (struct.pack("<Q", len(part)), part):
            view = memoryview(chunk)
            while view:
                try:
                    n = os.write(fd, view)
                except InterruptedError:
                    continue
                view = view[n:]


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



def is_exit_record(data: bytes | bytearray) -> bool:
    try:
        tag, parts = parse_record(bytes(data))
    except ValueError:
        return False
    return tag == TAG_EXIT and len(parts) == 1

