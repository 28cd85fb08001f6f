"""Process facts the tests read from /proc."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Running, or at least not dead: gone from /proc, or a zombie, is dead."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def reads_eof_now(fd: int) -> bool:
    """Does the read end ``fd`` see EOF at once, i.e. no process holds a copy of its
    write end any more (made non-blocking: a held copy reads as "nothing yet")?"""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1) == b""
    except BlockingIOError:
        return False
