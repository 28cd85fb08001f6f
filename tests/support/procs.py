"""Process facts the tests read from /proc."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """Running, or at least not dead: gone from /proc, or a zombie, is dead."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False
