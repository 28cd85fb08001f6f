"""Is a store session's owner alive? Its flock, and who took it.

A session is an flock on ``sessions/<sid>.lock`` that dies with its process. The flock
alone cannot say which process holds it: it belongs to the open file, and a child the
owner forks shares that file from ``fork()`` until its ``exec()`` closes the
``O_CLOEXEC`` descriptor (for good, a child that never execs). A session process
SIGKILLed while a ``find`` it had just forked (the copy backend's listing at the start
of a commit) had not exec'd yet left its lock held a few more milliseconds by that
child: a recovery running in those milliseconds took the dead session for alive and
kept its branch directory (1 run in 70 of the random-kill trials on a loaded machine).

So the owner writes who it is into the lock file (:func:`claim`: pid, start time, pid
namespace), and :func:`held_by_live_owner` counts a held lock only while that process
runs. Whenever it cannot tell (a lock written by an older release or not written yet,
an owner in another pid namespace, a process it may not look at), the lock alone
decides, as before: a live session is never taken for dead.
"""

from __future__ import annotations

import fcntl
import os

_RECORD_MAX = 128


def claim(fd: int) -> None:
    """Record this process as the owner of the session whose flock ``fd`` holds."""
    record = f"{os.getpid()} {_start_time('self')} {_pid_namespace()}\n".encode()
    os.pwrite(fd, record, 0)


def held_by_live_owner(fd: int) -> bool:
    """True while the session of the lock file open at ``fd`` (read-write) belongs to a
    running process: its flock is held and not only by an orphaned child of the owner.
    Raises ``OSError`` when the lock cannot be tested."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _owner_running(os.pread(fd, _RECORD_MAX, 0))
    return False


def _owner_running(record: bytes) -> bool:
    parts = record.split()
    if len(parts) != 3 or not parts[0].isdigit():
        return True  # an older release's lock, or the owner is about to write it
    pid = int(parts[0])
    start, namespace = parts[1].decode(errors="replace"), parts[2].decode(errors="replace")
    if not namespace or namespace != _pid_namespace():
        return True  # its pid means nothing here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    fields = _stat_fields(str(pid))
    if fields is None:
        return True  # cannot look (hidepid): it exists
    # fields[0] is the state (field 3), fields[19] the start time (field 22); a zombie
    # holds no files, and another start time is another process under a reused pid
    return fields[0] != b"Z" and start in ("?", fields[19].decode())


def _start_time(pid: str) -> str:
    fields = _stat_fields(pid)
    return "?" if fields is None else fields[19].decode()


def _stat_fields(pid: str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 19 else None


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


__all__ = ["claim", "held_by_live_owner"]
