"""Thin ctypes wrappers for the Linux syscalls Python 3.11's ``os`` module lacks.

Everything here is called in forked children of a possibly multi-threaded parent,
between ``fork`` and the target, so each wrapper is a direct libc call plus an
``OSError`` on failure: no locks, no logging, no allocation beyond ctypes' own.
The libc handle and the function objects are resolved at import time, in the
parent, so a child never has to look a symbol up.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

_libc = ctypes.CDLL(None, use_errno=True)

# Namespace flags (linux/sched.h).
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

# mount(2) flags.
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 0x2

# mount_setattr(2), open_tree(2), move_mount(2).
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
AT_FDCWD = -100
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
MOVE_MOUNT_F_EMPTY_PATH = 0x4

# prctl(2).
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

# Generic syscall numbers: identical on x86_64 and aarch64 for these new calls.
_SYS_OPEN_TREE = 428
_SYS_MOVE_MOUNT = 429
_SYS_MOUNT_SETATTR = 442

_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_unshare = _libc.unshare
_unshare.argtypes = [ctypes.c_int]
_setns = _libc.setns
_setns.argtypes = [ctypes.c_int, ctypes.c_int]
_mount = _libc.mount
_mount.argtypes = [
    ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p
]
_umount2 = _libc.umount2
_umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_sethostname = _libc.sethostname
_sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_capset = _libc.capset
_capset.argtypes = [ctypes.POINTER(_CapHeader), ctypes.POINTER(_CapData)]
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


_inotify_init1 = _libc.inotify_init1
_inotify_init1.argtypes = [ctypes.c_int]
_inotify_add_watch = _libc.inotify_add_watch
_inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
_statfs = _libc.statfs
_statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]

# inotify(7).
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000


def _check(ret: int, what: str, path: bytes | str | None = None) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        if path is not None:
            raise OSError(err, f"{what}: {os.strerror(err)}", os.fsdecode(path))
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def _b(path: str | bytes | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def unshare(flags: int) -> None:
    _check(_unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_setns(fd, nstype), "setns")


def mount(
    source: str | bytes | None,
    target: str | bytes,
    fstype: str | bytes | None,
    flags: int = 0,
    data: str | bytes | None = None,
) -> None:
    _check(_mount(_b(source), _b(target), _b(fstype), flags, _b(data)), "mount", target)


def umount2(target: str | bytes, flags: int = 0) -> None:
    _check(_umount2(_b(target), flags), "umount2", target)


def mount_setattr(
    path: str | bytes, *, set_: int = 0, clear: int = 0, recursive: bool = False,
    dirfd: int = AT_FDCWD, empty_path: bool = False,
) -> None:
    attr = _MountAttr(set_, clear, 0, 0)
    flags = (AT_RECURSIVE if recursive else 0) | (AT_EMPTY_PATH if empty_path else 0)
    ret = _syscall(
        ctypes.c_long(_SYS_MOUNT_SETATTR), ctypes.c_int(dirfd), ctypes.c_char_p(_b(path)),
        ctypes.c_uint(flags), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(ret, "mount_setattr", path)


def open_tree_clone(path: str | bytes, *, recursive: bool = True, dirfd: int = AT_FDCWD) -> int:
    """A detached copy of the mount tree at ``path`` (relative to ``dirfd``; ``""`` for
    ``dirfd`` itself), as an fd (move_mount puts it back)."""
    flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (AT_RECURSIVE if recursive else 0)
    if not path:
        flags |= AT_EMPTY_PATH
    ret = _syscall(
        ctypes.c_long(_SYS_OPEN_TREE), ctypes.c_int(dirfd), ctypes.c_char_p(_b(path)),
        ctypes.c_uint(flags),
    )
    return _check(ret, "open_tree", path)


def move_mount_fd(fd: int, target: str | bytes) -> None:
    ret = _syscall(
        ctypes.c_long(_SYS_MOVE_MOUNT), ctypes.c_int(fd), ctypes.c_char_p(b""),
        ctypes.c_int(AT_FDCWD), ctypes.c_char_p(_b(target)),
        ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH),
    )
    _check(ret, "move_mount", target)


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    return _check(_prctl(option, arg2, arg3, arg4, arg5), "prctl")


def sethostname(name: bytes) -> None:
    _check(_sethostname(name, len(name)), "sethostname")


def inotify_init() -> int:
    """A non-blocking, close-on-exec inotify instance."""
    return _check(_inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC), "inotify_init1")


def inotify_add_watch(fd: int, path: str | bytes, mask: int) -> int:
    return _check(_inotify_add_watch(fd, _b(path), mask), "inotify_add_watch", path)


def filesystem_type(path: str | bytes) -> int:
    """The ``f_type`` magic number of the filesystem holding ``path`` (statfs(2))."""
    buf = ctypes.create_string_buffer(256)  # struct statfs: f_type is the first word
    _check(_statfs(_b(path), buf), "statfs", path)
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


def drop_all_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets.

    With the bounding set empty and no_new_privs set, not even a later execve of a
    setuid binary (or by uid 0) can give capabilities back, so the sandboxed code
    cannot undo the read-only mounts.
    """
    for cap in range(64):
        if _prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            break  # EINVAL past the last capability the kernel knows
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_capset(ctypes.byref(header), data), "capset")


def end_pid_namespace() -> None:
    """As a pid namespace's init: SIGKILL every other member (``kill(-1)`` reaches only
    them) and reap them all, so an end record can promise nothing of the sandbox runs."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


__all__ = [
    "AT_RECURSIVE",
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "CLONE_NEWUTS",
    "MNT_DETACH",
    "MOUNT_ATTR_NODEV",
    "MOUNT_ATTR_NOSUID",
    "MOUNT_ATTR_RDONLY",
    "MS_BIND",
    "MS_MOVE",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "MS_REMOUNT",
    "PR_SET_DUMPABLE",
    "PR_SET_PDEATHSIG",
    "drop_all_capabilities",
    "end_pid_namespace",
    "filesystem_type",
    "inotify_add_watch",
    "inotify_init",
    "mount",
    "mount_setattr",
    "move_mount_fd",
    "open_tree_clone",
    "prctl",
    "sethostname",
    "setns",
    "umount2",
    "unshare",
]
