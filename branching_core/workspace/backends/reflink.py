"""Reflink branches: a copy whose file data is shared with the parent until written.

On btrfs and xfs (reflink=1) each file is cloned with FICLONE, so creating a branch
costs metadata only and commit still publishes by rename. Semantics are the copy
backend's exactly; only the way bytes are duplicated differs.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from branching_core.workspace.backends.copy import CopyBackend

FICLONE = 0x40049409


def clone_file(source: str, target: str) -> None:
    if os.path.islink(source) or not os.path.isfile(source):
        shutil.copy2(source, target, follow_symlinks=False)
        return
    with open(source, "rb") as src, open(target, "wb") as dst:
        fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
    shutil.copystat(source, target, follow_symlinks=False)


class ReflinkBackend(CopyBackend):
    name = "reflink"

    @classmethod
    def probe(cls, workspace: Path, store_root: Path) -> str | None:
        reason = super().probe(workspace, store_root)
        if reason:
            return reason
        source = store_root / f".probe-reflink-src-{os.getpid()}"
        target = store_root / f".probe-reflink-dst-{os.getpid()}"
        try:
            source.write_bytes(b"forkdeck")
            clone_file(str(source), str(target))
        except OSError as exc:
            fstype = _fstype(store_root)
            return f"{fstype} does not support reflink clones (FICLONE: {exc.strerror})"
        finally:
            for path in (source, target):
                if path.exists():
                    path.unlink()
        return None

    def copy_file(self, source: str, target: str) -> None:
        clone_file(source, target)


def _fstype(path: Path) -> str:
    """The filesystem type holding ``path``, from /proc/self/mountinfo (longest prefix)."""
    best, best_type = "", "this filesystem"
    target = str(path.resolve())
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                mount_point = left.split()[4]
                if (
                    target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
                ) and len(mount_point) >= len(best):
                    best, best_type = mount_point, right.split()[0]
    except OSError:
        pass
    return best_type
