"""The one atomic-write helper: readers (and a process recovering after a kill) see the
old file or the new one, never an empty or half-written one.

Why a module of its own at the top of the package: the settings (``config``), the agent's
``write_file`` tool and the workspace's JSON records all need the same temp-file + rename
dance, and ``config`` sits in the top layer, which may import nothing else from the
project. So this module imports only the standard library.

How: the data goes to a temp file in the *same directory* (a rename across filesystems is
not atomic), which gets the old file's permission bits (and owner, when we may set it),
is optionally fsynced, and then ``os.replace``-d over the target. The temp name is short
and independent of the target's name, so a target whose name is near the 255-byte limit
can still be written. A rename replaces a symlink at ``path`` itself, never the file it
points to: callers that mean to write through a link resolve it first, on purpose.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from branching_core.errors import PathExistsError, PathIsDirectoryError

DEFAULT_MODE = 0o644
_TMP_PREFIX = ".fdtmp-"


def fsync_directory(path: Path | str) -> None:
    """Make a rename in ``path`` durable; filesystems that refuse a directory fsync are
    tolerated (the rename is done anyway)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _create_temp(directory: str) -> tuple[int, str]:
    for _ in range(100):
        name = os.path.join(directory, _TMP_PREFIX + secrets.token_hex(6))
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        return fd, name
    raise PathExistsError(f"no free temporary name in {directory}")


def atomic_write(
    path: Path | str,
    data: bytes,
    *,
    mode: int | None = None,
    durable: bool = False,
) -> None:
    """Replace ``path`` with ``data`` in one rename.

    ``mode``: permission bits of the new file; by default those of the file being replaced
    (its owner too, best effort), else :data:`DEFAULT_MODE` (``umask`` is not applied, as
    for a rename nothing else would be). ``durable``: fsync the data and the directory, so
    the new content also survives a power loss, not only a killed process.

    Raises :class:`OSError` (``IsADirectoryError`` when ``path`` is a directory) and then
    leaves no temp file behind and ``path`` as it was.
    """
    target = os.fspath(path)
    directory = os.path.dirname(target) or "."
    owner: tuple[int, int] | None = None
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise PathIsDirectoryError(21, "Is a directory", target)
        if stat.S_ISREG(st.st_mode):
            owner = (st.st_uid, st.st_gid)
            if mode is None:
                mode = stat.S_IMODE(st.st_mode)
    if mode is None:
        mode = DEFAULT_MODE
    fd, tmp = _create_temp(directory)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if owner is not None and owner != (os.geteuid(), os.getegid()):
                with contextlib.suppress(OSError):
                    os.fchown(fd, *owner)  # before chmod: a chown clears set-id bits
            os.fchmod(fd, mode)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_directory(directory)


def is_atomic_temp(name: str) -> bool:
    """Whether a directory entry is one of :func:`atomic_write`'s temp files (left behind
    only by a process killed between create and rename; safe to delete)."""
    return name.startswith(_TMP_PREFIX)


__all__ = ["DEFAULT_MODE", "atomic_write", "fsync_directory", "is_atomic_temp"]
