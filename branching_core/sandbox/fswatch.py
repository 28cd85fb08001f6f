# pyright: strict
"""A cheap proof that directories, and the mount table above them, did not change.

The caller's caches of what the host looks like (``masks.secret_masks``) are reused only
while everything they rest on is provably unchanged; proving it with an ``lstat`` of each
path cost one system call per path on every sandbox start. A ``DirWatch`` asks the
kernel instead: an inotify watch on each directory reports every entry created, removed,
renamed, written or changed in its attributes, and the directory itself moving or going
away; ``poll`` on an open ``mountinfo`` reports every mount and unmount in this mount
namespace (which inotify does not see). While neither reported anything since the watch
was armed, nothing it watches changed, in two system calls whatever their number.

Only directories on local filesystems are watched (inotify does not hear of changes
made by other hosts to a network filesystem): anything else raises ``Unwatchable`` and
the caller keeps proving by ``lstat``. A watch belongs to the process that made it: a
fork child must not read the parent's events (it would consume them), so owners close
their watches in every child (an at-fork handler).
"""

from __future__ import annotations

import contextlib
import os
import select
from collections.abc import Iterable

from branching_core.errors import BranchingError
from branching_core.sandbox import _syscalls as sc

# Filesystems whose every change reaches inotify on this host (statfs(2) magic numbers).
LOCAL_FILESYSTEMS = frozenset({
    0xEF53,  # ext2/3/4
    0x58465342,  # xfs
    0x9123683E,  # btrfs
    0x01021994,  # tmpfs
    0x858458F6,  # ramfs
    0x794C7630,  # overlayfs (changes made through it)
    0xF2F52010,  # f2fs
})
_EVENTS = (sc.IN_MODIFY | sc.IN_ATTRIB | sc.IN_MOVED_FROM | sc.IN_MOVED_TO | sc.IN_CREATE
           | sc.IN_DELETE | sc.IN_DELETE_SELF | sc.IN_MOVE_SELF)


class Unwatchable(BranchingError):
    """These directories cannot be watched here (a network filesystem, no inotify)."""


class DirWatch:
    """Reports whether anything happened to ``dirs`` or the mount table since ``drain``."""

    def __init__(self, dirs: Iterable[str]) -> None:
        self.fd = self.mounts = -1
        try:
            self.fd = sc.inotify_init()
            for path in dirs:
                if sc.filesystem_type(path) not in LOCAL_FILESYSTEMS:
                    raise Unwatchable(f"{path} is not on a local filesystem")
                sc.inotify_add_watch(self.fd, path, _EVENTS | sc.IN_ONLYDIR | sc.IN_DONT_FOLLOW)
            self.namespace = os.stat("/proc/thread-self/ns/mnt").st_ino
            self.mounts = os.open("/proc/thread-self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            self.close()
            raise Unwatchable(str(exc)) from exc
        except BaseException:
            self.close()
            raise
        self.poller = select.poll()
        self.poller.register(self.mounts, select.POLLPRI | select.POLLERR)
        self.changed = False  # seen since the last drain (``quiet`` consumes events)

    def quiet(self) -> bool:
        """Whether nothing happened since the watch was armed or last drained. What it
        saw stays seen (reading an event, or polling the mount table, consumes it):
        only ``drain`` forgets."""
        if not self.changed:
            self.changed = not self._nothing_new()
        return not self.changed

    def _nothing_new(self) -> bool:
        if self.fd < 0:
            return False
        try:
            os.read(self.fd, 4096)
        except BlockingIOError:
            pass  # no event queued
        except OSError:
            return False
        else:
            return False  # an event (the rest is read by ``drain``)
        try:
            if self.poller.poll(0):
                return False
            return os.stat("/proc/thread-self/ns/mnt").st_ino == self.namespace
        except OSError:
            return False

    def drain(self) -> None:
        """Forget what happened so far (the caller proves it harmless some other way,
        after this: a change from now on is seen)."""
        with contextlib.suppress(OSError):
            while os.read(self.fd, 65536):
                pass
        with contextlib.suppress(OSError):
            self.poller.poll(0)  # (reports a change of the mount table once)
        self.changed = self.fd < 0

    def close(self) -> None:
        for fd in (self.fd, self.mounts):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd = self.mounts = -1


__all__ = ["LOCAL_FILESYSTEMS", "DirWatch", "Unwatchable"]
