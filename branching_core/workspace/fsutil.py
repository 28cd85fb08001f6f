"""Small filesystem helpers shared by the store, the journal and the backends."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeGuard

from branching_core.atomicio import atomic_write

OVERLAY_XATTR_PREFIXES = ("user.overlay.", "trusted.overlay.")
PROJECT_STATE_DIR = ".pydantic-deep"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: object, *, durable: bool = False) -> None:
    """Write JSON so readers see the old or the new file, never a torn one."""
    atomic_write(path, json.dumps(data, sort_keys=True).encode(), durable=durable)


def read_json(path: Path) -> Any:
    with open(path, "rb") as fh:
        return json.load(fh)


def is_json_object(value: object) -> TypeGuard[dict[str, object]]:
    """A decoded JSON value that is an object (JSON object keys are always strings)."""
    return isinstance(value, dict)


def is_json_list(value: object) -> TypeGuard[list[object]]:
    """A decoded JSON value that is an array."""
    return isinstance(value, list)


def rmtree(path: Path) -> None:
    """Remove a tree even when overlayfs left mode-000 work directories in it."""

    def _onerror(
        func: Callable[..., object],
        failed: str,
        exc_info: tuple[type[BaseException], BaseException, TracebackType],
    ) -> None:
        exc = exc_info[1]
        if isinstance(exc, FileNotFoundError):
            return
        if isinstance(exc, PermissionError):
            parent = os.path.dirname(failed)
            with contextlib.suppress(OSError):
                os.chmod(parent, 0o700)
            with contextlib.suppress(OSError):
                os.chmod(failed, 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                shutil.rmtree(failed, onerror=_onerror)
            else:
                os.unlink(failed)
            return
        raise exc

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, onerror=_onerror)
    else:
        os.unlink(path)


def remove_shallow_tree(path: Path) -> None:
    """Remove ``path`` (a directory of directories of entries, like a commit's scratch)
    with one ``unlink``/``rmdir`` per entry relative to an open directory, nothing else.

    Why not ``rmtree``: a commit's scratch holds one displaced link per replaced file;
    ``shutil.rmtree`` stats and ``pathlib`` joins each of them, and a ``rm -rf`` child costs
    a fork+exec and a wait (tens of ms on a loaded machine). Here the Python per entry is a
    single call that releases the GIL for its syscall, so an event loop in another thread
    is not starved either. Anything deeper (a displaced directory) goes to :func:`rmtree`.
    """
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        rmtree(path)
        return
    try:
        for name in os.listdir(top):
            try:
                os.unlink(name, dir_fd=top)
                continue
            except IsADirectoryError:
                pass
            except PermissionError:  # Linux says EISDIR, some filesystems EPERM
                if not stat.S_ISDIR(os.lstat(name, dir_fd=top).st_mode):
                    raise
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
            try:
                for entry in os.listdir(sub):
                    try:
                        os.unlink(entry, dir_fd=sub)
                    except (IsADirectoryError, PermissionError):
                        rmtree(path / name / entry)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)


def is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def has_xattr(path: Path, name: str) -> bool:
    try:
        os.getxattr(path, name, follow_symlinks=False)
    except OSError:
        return False
    return True


def strip_overlay_xattrs(path: str | Path) -> None:
    """Drop overlayfs bookkeeping so a committed file is an ordinary file again (a str
    too: a commit's landed paths are joined as strings, see ``journal._strip_landed``)."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return
    for name in names:
        if name.startswith(OVERLAY_XATTR_PREFIXES):
            with contextlib.suppress(OSError):
                os.removexattr(path, name, follow_symlinks=False)


def lstat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def nearest_existing(path: Path) -> Path | None:
    """``path`` or its closest ancestor that exists (None when not even ``/`` does):
    which filesystem a path not made yet, or no longer there, would be on."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return None
        probe = probe.parent
    return probe


def same_device(a: Path, b: Path) -> bool:
    try:
        return os.stat(a).st_dev == os.stat(b).st_dev
    except OSError:
        return False


def is_exdev(exc: OSError) -> bool:
    return exc.errno == errno.EXDEV
