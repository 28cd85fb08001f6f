"""Host unix sockets made unreachable inside a sandbox (without ``network=True``).

``connect(2)`` to a path socket finds the listening socket by the *inode* the path
resolves to, and needs only write permission on it: a read-only mount does not stop
it (sockets ignore ``MS_RDONLY``), a seccomp filter cannot read ``connect``'s address
(it could only forbid every AF_UNIX socket, breaking ``multiprocessing``, test servers
and ``socketpair`` users), and Landlock (ABI 7 here) scopes only abstract sockets and
socket creation. An overlay mount gives every file its own inode, so a host socket
seen through a read-only overlay of its directory answers ECONNREFUSED. The caller
plans which directories get one (``plan_socket_hiding``: Python is cheap there, not in
a freshly forked child); ``steps.compile_steps`` turns that into the overlays (or binds
from one overlay per mount, for a root caller) the sandbox's init mounts.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import stat
import threading
import time
from dataclasses import dataclass, replace

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


@dataclass(frozen=True)
class SocketPlan:
    """Where the sandbox's init stacks overlays and which socket files it covers."""

    overlay_dirs: tuple[str, ...] = ()
    socket_files: tuple[str, ...] = ()
    mount_points: tuple[str, ...] = ()  # of the tree the sandbox starts from, sorted

    def containing_mount(self, path: str) -> str:
        """The mount point ``path`` lives on (the longest one above or at it)."""
        best = "/"
        for point in self.mount_points:
            above = path == point or path.startswith(point.rstrip("/") + "/")
            if above and len(point) > len(best):
                best = point
        return best

    def has_mount_below(self, path: str) -> bool:
        prefix = path.rstrip("/") + "/"
        return any(p.startswith(prefix) for p in self.mount_points)


def plan_socket_hiding(skip: tuple[str, ...], helper_pid: int | None = None) -> SocketPlan:
    """What to cover for a sandbox starting from the caller's mount tree (or the view
    helper's): the walk below, or its cached result while it is provably unchanged.

    The result depends only on the mount table and on the listings of the directories
    the walk descends into (those holding mount points: ``/``, ``/mnt``, ...); whatever
    lies in a directory that becomes an overlay is hidden whole, new sockets included.
    So a cached walk is reused only while (1) ``poll`` on an open ``mountinfo`` of that
    mount namespace reports no mount or unmount since the walk (the kernel flags every
    change of the namespace's mount table), or the mount table read again differs only
    where the walk would decide the same (``_Walked._same_walk``), and (2) every walked
    directory that can hold a socket still has the same device, inode, mtime and ctime
    (creating, removing or renaming an entry updates them). A directory changed within
    ``RACY_NS`` of the walk could change again within the same timestamp tick unseen,
    so such a walk is not cached. Per process, at most ``_MAX_WALKS`` configurations.
    """
    key = (skip, helper_pid, os.geteuid())  # what the walk could list depends on who asks
    with _walks_lock:
        cached = _walks.get(key)
        if cached is not None and cached.still_valid():
            return cached.plan
        if cached is not None:
            del _walks[key]
            cached.close()
        walked = _walk(skip, helper_pid)
        if walked.cacheable:
            while len(_walks) >= _MAX_WALKS:
                _walks.pop(next(iter(_walks))).close()
            _walks[key] = walked
        else:
            walked.close()
        return walked.plan


RACY_NS = 2_000_000_000  # timestamps are coarse (a clock tick; seconds on some filesystems)
_MAX_WALKS = 8
_Signature = tuple[int, int, int, int]


def _signature(path: str) -> _Signature | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _namespace(helper_pid: int | None) -> tuple[int, int] | None:
    """The identity of a mount namespace (a proc inode's times change on every lookup)."""
    sig = _signature(f"/proc/{helper_pid}/ns/mnt" if helper_pid is not None
                     else "/proc/self/ns/mnt")
    return None if sig is None else sig[:2]


class _Walked:
    """One walk's plan and what proves it still holds (see ``plan_socket_hiding``)."""

    def __init__(self, plan: SocketPlan, root: str, helper_pid: int | None,
                 dirs: list[tuple[str, _Signature | None]], started_ns: int,
                 mounts: dict[str, str], skip: tuple[str, ...]) -> None:
        self.plan = plan
        self.skip = skip
        self.mounts: dict[str, str] = mounts
        self.info = (f"/proc/{helper_pid}/mountinfo" if helper_pid is not None
                     else "/proc/self/mountinfo")
        self.root = root
        self.dirs = dirs
        self.ns = _namespace(helper_pid)
        self.helper_pid = helper_pid
        self.poller: select.poll | None = None
        self.fd = -1
        recent = started_ns - RACY_NS
        self.cacheable = self.ns is not None and all(
            sig is not None and sig[2] < recent and sig[3] < recent for _d, sig in dirs)

    def watch(self, fd: int) -> None:
        self.fd = fd
        self.poller = select.poll()
        self.poller.register(fd, select.POLLPRI | select.POLLERR)

    def still_valid(self) -> bool:
        if self.poller is None:
            return False
        try:
            # The mount table changed (the event is consumed): still valid if what the
            # walk used of it (mount points and their types) is the same.
            if self.poller.poll(0) and not self._same_walk(read_mount_points(self.info)):
                return False
        except OSError:
            return False
        if _namespace(self.helper_pid) != self.ns:  # another namespace behind that pid now
            return False
        return all(_signature(self.root + d) == sig for d, sig in self.dirs)

    def _same_walk(self, mounts: dict[str, str]) -> bool:
        """Whether the walk would decide the same on ``mounts`` (then the plan takes
        their mount points). Mounts come and go under skipped places (``/tmp``) all
        the time; the walk never enters those, and it descends into each of their
        ancestors as before if that ancestor still holds an unchanged mount below."""
        if mounts == self.mounts:
            return True
        changed = {p for p in {*mounts, *self.mounts} if mounts.get(p) != self.mounts.get(p)}
        stable = [p for p in mounts if p not in changed]
        for point in changed:
            place = next((s for s in self.skip if point == s or point.startswith(s + "/")),
                         None)
            if place is None:
                return False
            for above in _ancestors(place):
                prefix = "/" if above == "/" else above + "/"
                if not any(p.startswith(prefix) and p != above for p in stable):
                    return False
        self.mounts = mounts
        self.plan = replace(self.plan, mount_points=tuple(sorted(mounts)))
        return True

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        self.poller = None


def _ancestors(path: str) -> list[str]:
    out: list[str] = []
    while path != "/":
        path = os.path.dirname(path)
        out.append(path)
    return out


_walks_lock = threading.Lock()
_walks: dict[tuple[tuple[str, ...], int | None, int], _Walked] = {}


def _forget_walks_in_child() -> None:
    """A forked child starts with no cache (and a fresh lock: a thread of the parent
    may have held it at fork time)."""
    global _walks_lock, _walks
    for walked in _walks.values():
        walked.close()
    _walks = {}
    _walks_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_walks_in_child)


def _walk(skip: tuple[str, ...], helper_pid: int | None) -> _Walked:
    """Walk the mount tree the sandbox will start from and decide what to cover.

    Inside a user namespace a mount with child mounts cannot be an overlay layer (its
    children are locked), so directories holding mount points are walked: each entry
    without a mount beneath becomes its own overlay, mount points are handled the same
    way, and a socket file directly in such a directory (a bind-mounted ``docker.sock``)
    gets ``/dev/null`` bound over it.
    """
    started_ns = time.time_ns()
    root = f"/proc/{helper_pid}/root" if helper_pid is not None else ""
    info = f"/proc/{helper_pid}/mountinfo" if helper_pid is not None else "/proc/self/mountinfo"
    try:  # opened before reading: any change after this point shows in its poll
        watch_fd = os.open(info, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        watch_fd = -1
    mounts = read_mount_points(info)
    points = sorted(mounts)
    overlays: list[str] = []
    sockets: list[str] = []
    walked: list[tuple[str, _Signature | None]] = []

    def skipped(path: str) -> bool:
        return any(path == s or path.startswith(s + "/") for s in skip)

    def has_mount_below(path: str) -> bool:
        prefix = "/" if path == "/" else path + "/"
        return any(p.startswith(prefix) and p != path for p in points)

    def walk(directory: str, fstype: str) -> None:
        if fstype not in _NO_SOCKET_FS:  # (there only mounts matter: watched by poll)
            walked.append((directory, _signature(root + directory)))  # before listing
        try:
            with os.scandir(root + directory) as entries:
                listing = [(e.name, e.is_dir(follow_symlinks=False), e.is_symlink())
                           for e in entries]
        except OSError:
            return  # unreadable: nothing we could list is reachable through it either
        for name, is_dir, is_link in listing:
            path = f"{directory.rstrip('/')}/{name}"
            if is_link or skipped(path):
                continue
            fs = mounts.get(path, fstype)
            if not is_dir:
                try:
                    if stat.S_ISSOCK(os.lstat(root + path).st_mode):
                        sockets.append(path)
                except OSError:
                    pass
            elif has_mount_below(path):
                walk(path, fs)
            elif fs not in _NO_SOCKET_FS:
                overlays.append(path)

    walk("/", mounts.get("/", ""))
    result = _Walked(SocketPlan(tuple(overlays), tuple(sockets), tuple(points)), root,
                     helper_pid, walked, started_ns, mounts, skip)
    if watch_fd >= 0:
        result.watch(watch_fd)
    else:
        result.cacheable = False
    return result


__all__ = [
    "EMPTY_DIR",
    "SocketPlan",
    "plan_socket_hiding",
    "read_mount_points",
]
