"""File operations confined below a root: no symlink inside the root is ever followed.

Why: a branch (a model's files, a Ray node's delta, an IDE's mirror) decides what lies
below the root we write into. ``root / rel`` followed by ``open`` resolves every
component again, so a directory the branch turned into ``lnk -> /home/user`` (even a
moment after a check) sends the write outside. Here each operation opens the directories
of ``rel`` one at a time relative to the previous one with ``O_NOFOLLOW`` (the openat
walk) and then acts relative to the last one: a symlink on the way is an
``UnsafeChangeError``, never a path taken. The root itself may be a link (overlay views
are reached through ``/proc/<pid>/root``): the caller chose it.

Paths must already satisfy :func:`~branching_core.workspace.paths.path_problem` (the
landing rule checks that first); here ``rel`` is only split.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Generator
from pathlib import Path

from branching_core.errors import PathIsDirectoryError, PathNotDirectoryError, UnsafeChangeError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _split(rel: str) -> tuple[list[str], str]:
    parts = rel.split("/")
    return parts[:-1], parts[-1]


def _refuse(rel: str, upto: list[str], why: str) -> UnsafeChangeError:
    where = "/".join(upto)
    return UnsafeChangeError(f"{rel}: {where} {why}; not followed", [rel])


@contextlib.contextmanager
def open_dir(
    root: Path | str, rel_dir: str | list[str], *, create: bool = False, mode: int = 0o777
) -> Generator[int, None, None]:
    """A descriptor of the directory ``rel_dir`` below ``root`` (``""``: the root),
    reached without following a link; ``create`` makes missing directories (``mode``)."""
    parts = rel_dir if isinstance(rel_dir, list) else [p for p in rel_dir.split("/") if p]
    shown = "/".join(parts)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for depth, part in enumerate(parts):
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, mode, dir_fd=fd)
                nfd = _open_existing(part, fd, shown, parts[: depth + 1])
            except OSError as exc:
                raise _not_a_dir(exc, part, fd, shown, parts[: depth + 1]) from None
            os.close(fd)
            fd = nfd
        yield fd
    finally:
        os.close(fd)


def _open_existing(part: str, fd: int, rel: str, upto: list[str]) -> int:
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        raise _not_a_dir(exc, part, fd, rel, upto) from None


def _not_a_dir(
    exc: OSError, part: str, fd: int, rel: str, upto: list[str]
) -> OSError | UnsafeChangeError:
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
        return exc
    try:
        st = os.lstat(part, dir_fd=fd)
    except OSError:
        return exc
    if stat.S_ISLNK(st.st_mode):
        return _refuse(rel, upto, "is a symlink")
    return PathNotDirectoryError(errno.ENOTDIR, "not a directory", "/".join(upto))


def lstat(root: Path | str, rel: str) -> os.stat_result | None:
    """``lstat`` of ``rel`` below ``root`` (None when absent); a symlink among its
    directories raises ``UnsafeChangeError``."""
    dirs, name = _split(rel)
    try:
        with open_dir(root, dirs) as fd:
            return os.lstat(name, dir_fd=fd)
    except (FileNotFoundError, NotADirectoryError):
        return None


def read_bytes(root: Path | str, rel: str) -> bytes:
    """The bytes of the regular file ``rel`` (its last component not followed either)."""
    dirs, name = _split(rel)
    with open_dir(root, dirs) as dfd:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafeChangeError(f"{rel}: not a regular file", [rel])
            with os.fdopen(os.dup(fd), "rb") as fh:
                return fh.read()
        finally:
            os.close(fd)


def readlink(root: Path | str, rel: str) -> str:
    dirs, name = _split(rel)
    with open_dir(root, dirs) as dfd:
        return os.readlink(name, dir_fd=dfd)


def write_file(
    root: Path | str,
    rel: str,
    data: bytes | None = None,
    *,
    source_fd: int | None = None,
    mode: int = 0o644,
    tmp_prefix: str = ".forkdeck-tmp-",
    make_dirs: bool = True,
) -> None:
    """Replace ``rel`` with a regular file (``data``, or the rest of ``source_fd``),
    published by rename within its directory: a reader never sees a torn file, and a
    symlink at ``rel`` is replaced, never written through."""
    dirs, name = _split(rel)
    with open_dir(root, dirs, create=make_dirs) as dfd:
        tmp = f"{tmp_prefix}{name}"[:200] + f".{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dfd)
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
            dir_fd=dfd,
        )
        try:
            try:
                if source_fd is not None:
                    while chunk := os.read(source_fd, 1 << 20):
                        _write_all(fd, chunk)
                elif data:
                    _write_all(fd, data)
                os.fchmod(fd, stat.S_IMODE(mode))
            finally:
                os.close(fd)
            st = _lstat_at(name, dfd)
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise PathIsDirectoryError(errno.EISDIR, "a directory is in the way", rel)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _lstat_at(name: str, dfd: int) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=dfd)
    except FileNotFoundError:
        return None


def symlink(root: Path | str, rel: str, target: str, *, make_dirs: bool = True) -> None:
    """Make ``rel`` a symlink to ``target`` (whatever was there, not a directory, goes)."""
    dirs, name = _split(rel)
    with open_dir(root, dirs, create=make_dirs) as dfd:
        st = _lstat_at(name, dfd)
        if st is not None:
            _remove_at(name, dfd, st)
        os.symlink(target, name, dir_fd=dfd)


def mkdir(root: Path | str, rel: str, mode: int | None) -> None:
    """Make ``rel`` a directory with ``mode`` (None: as ``mkdir`` does, under the umask),
    replacing a file or link standing there."""
    dirs, name = _split(rel)
    with open_dir(root, dirs, create=True) as dfd:
        st = _lstat_at(name, dfd)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            _remove_at(name, dfd, st)
            st = None
        if st is None:
            os.mkdir(name, 0o777 if mode is None else 0o700, dir_fd=dfd)
        if mode is None:
            return
        fd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
        try:
            os.fchmod(fd, stat.S_IMODE(mode))
        finally:
            os.close(fd)


def remove(root: Path | str, rel: str) -> bool:
    """Remove ``rel`` (a file, a link itself, or a whole directory); False when absent."""
    dirs, name = _split(rel)
    try:
        with open_dir(root, dirs) as dfd:
            st = _lstat_at(name, dfd)
            if st is None:
                return False
            _remove_at(name, dfd, st)
            return True
    except (FileNotFoundError, NotADirectoryError):
        return False


def _remove_at(name: str, dfd: int, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dfd)  # fd-based, never follows a link inside
    else:
        os.unlink(name, dir_fd=dfd)


__all__ = [
    "lstat",
    "mkdir",
    "open_dir",
    "read_bytes",
    "readlink",
    "remove",
    "symlink",
    "write_file",
]
