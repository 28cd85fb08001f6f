"""A record goes out in as few writes as it can (issue 29: isolated candidates).

Every write on the result pipe wakes the caller's drain; on a busy two-core machine each
wake-up may preempt the init writing the record. A result record used to take five
writes (tag, two lengths, two pickles) and an end record two. A ``SOCK_SEQPACKET``
socket keeps each write a message of its own, so the tests count the writes.
"""

from __future__ import annotations

import os
import socket

from branching_core.sandbox._records import (
    ONE_WRITE,
    TAG_RESULT,
    parse_record,
    split_end,
    write_end,
    write_large_record,
    write_record,
)


def _messages(sock: socket.socket) -> list[bytes]:
    sock.setblocking(False)
    out: list[bytes] = []
    while True:
        try:
            out.append(sock.recv(1 << 20))
        except BlockingIOError:
            return out


def test_a_result_record_is_one_write_and_the_end_record_one_more() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        write_large_record(theirs.fileno(), TAG_RESULT, b"meta" * 10, b"payload" * 100)
        write_end(theirs.fileno(), 3)
        messages = _messages(ours)
    assert len(messages) == 2
    record, code = split_end(b"".join(messages))
    assert code == 3
    assert parse_record(record) == (TAG_RESULT, [b"meta" * 10, b"payload" * 100])


def test_setup_records_are_one_write() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        write_record(theirs.fileno(), b"S", b"namespace", b"what failed")
        assert _messages(ours) == [b"S" + (9).to_bytes(8, "little") + b"namespace"
                                   + (11).to_bytes(8, "little") + b"what failed"]


def test_a_large_result_still_arrives_whole_through_a_pipe() -> None:
    """Over ``ONE_WRITE`` the parts go out one by one (no joined copy of a big payload);
    a reader on the other end gets the same bytes."""
    payload = os.urandom(ONE_WRITE * 3)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the writer
        os.close(r)
        write_large_record(w, TAG_RESULT, b"m", payload)
        os._exit(0)
    os.close(w)
    data = bytearray()
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert parse_record(bytes(data)) == (TAG_RESULT, [b"m", payload])
