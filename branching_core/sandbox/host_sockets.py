"""Host unix sockets made unreachable inside a sandbox (without ``network=True``).

``connect(2)`` to a path socket finds the listening socket by the *inode* the path
resolves to, and needs only write permission on it: a read-only mount does not stop
it (sockets ignore ``MS_RDONLY``), a seccomp filter cannot read ``connect``'s address
(it could only forbid every AF_UNIX socket, breaking ``multiprocessing``, test servers
and ``socketpair`` users), and Landlock (ABI 7 here) scopes only abstract sockets and
socket creation. An overlay mount gives every file its own inode, so a host socket
seen through a read-only overlay of its directory answers ECONNREFUSED; that is what
``SocketHider`` builds. Runs in the sandbox's init (``os`` and ctypes syscalls only).
"""

from __future__ import annotations

import os
import re
import stat

from branching_core.sandbox import _syscalls as sc

# Filesystems that cannot hold a socket inode: nothing to hide on them.
_NO_SOCKET_FS = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "securityfs", "debugfs",
    "tracefs", "bpf", "pstore", "configfs", "fusectl", "binfmt_misc", "efivarfs", "nsfs",
    "autofs", "selinuxfs", "rpc_pipefs",
})
EMPTY_DIR = "/dev/.forkdeck-empty"  # an overlay's second (empty) layer; unlinked after use
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def read_mount_points(mountinfo: str = "/proc/self/mountinfo") -> dict[str, str]:
    """Mount point -> filesystem type of the topmost mount there (mountinfo order)."""
    found: dict[str, str] = {}
    with open(mountinfo, encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) < 5 or not rfields:
                continue
            point = _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
            found[point] = rfields[0]
    return found


class SocketHider:
    """Make every host unix socket unreachable while the host tree stays readable.

    ``connect(2)`` to a path socket finds the listening socket by the *inode* the
    path resolves to. An overlay mount gives every file its own overlay inode, so a
    socket seen through a (read-only, upper-less) overlay is never found: ECONNREFUSED.
    A read-only bind mount would not help (sockets ignore MS_RDONLY), and a seccomp
    filter cannot read connect's address. So each host directory is re-shown through
    an overlay of itself. Inside a user namespace a mount with child mounts cannot be
    an overlay layer (its children are locked), so directories that contain mount
    points are walked instead: each entry without a mount beneath becomes its own
    overlay, mount points are handled the same way, and a socket file directly in such
    a directory (a bind-mounted ``docker.sock``, say) gets an empty file bound over it.
    """

    def __init__(self, mounts: dict[str, str], skip: tuple[str, ...]) -> None:
        self.mounts = mounts
        self.skip = skip
        self.points = sorted(mounts)
        self.empty_dir = EMPTY_DIR
        self.empty_file = "/dev/null"  # the sandbox's own /dev/null: not a socket

    def _skipped(self, path: str) -> bool:
        return any(path == s or path.startswith(s + "/") for s in self.skip)

    def _has_mount_below(self, path: str) -> bool:
        prefix = "/" if path == "/" else path + "/"
        return any(p.startswith(prefix) and p != path for p in self.points)

    def cover(self, directory: str, fstype: str) -> None:
        """Hide the sockets under ``directory`` (a mount point or a dir holding some)."""
        with os.scandir(directory) as entries:
            listing = [(e.name, e.is_dir(follow_symlinks=False), e.is_symlink()) for e in entries]
        for name, is_dir, is_link in listing:
            path = f"{directory.rstrip('/')}/{name}"
            if is_link or self._skipped(path):
                continue
            fs = self.mounts.get(path, fstype)
            if not is_dir:
                self._mask_if_socket(path)
            elif self._has_mount_below(path):
                self.cover(path, fs)
            elif fs not in _NO_SOCKET_FS:
                self.overlay(path)

    def _mask_if_socket(self, path: str) -> None:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return
        if stat.S_ISSOCK(mode):
            sc.mount(self.empty_file, path, None, sc.MS_BIND)

    def overlay(self, path: str) -> None:
        """Stack a read-only overlay of ``path`` on ``path`` itself."""
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            sc.mount("overlay", path, "overlay", sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV,
                     f"lowerdir=/proc/self/fd/{fd}:{self.empty_dir}")
        finally:
            os.close(fd)


__all__ = ["EMPTY_DIR", "SocketHider", "read_mount_points"]
