"""What running as a normal user gives up, in words a status line can carry.

Why: unprivileged use works (user namespaces, overlay with ``userxattr``), but two things
are missing and were never said: resource limits (cgroups need root or a delegated cgroup)
and renaming a directory that came from the project inside an overlay branch (no
``redirect_dir`` without privilege: EXDEV). ``forkdeck status`` and the TUI's greeting
say so once, instead of the user meeting them as errors.
"""

from __future__ import annotations

import os


def limits_available() -> bool:
    """Whether per-branch memory/CPU limits can be placed: root, or a cgroup v2 that
    delegates the memory and cpu controllers to us."""
    if os.geteuid() == 0:
        return True
    try:
        from branching_core.sandbox.cgroups import CgroupMounts

        mounts = CgroupMounts.discover()
    except (OSError, ValueError):  # no cgroup filesystem readable: no limits
        return False
    if (
        mounts.v2_dir is not None
        and {"memory", "cpu"} <= mounts.v2_delegated()
        and os.access(mounts.v2_dir, os.W_OK)
    ):
        return True
    v1 = [mounts.v1_dirs.get(name) for name in ("memory", "cpu")]
    return all(d is not None and os.access(d, os.W_OK) for d in v1)


def unprivileged_limits(fstype: str | None) -> list[str]:
    """What this user cannot have (empty for root): one short clause each."""
    if os.geteuid() == 0:
        return []
    clauses: list[str] = []
    if not limits_available():
        clauses.append("no memory/CPU limits for branches (cgroups need root or delegation)")
    if fstype in (None, "overlay"):
        clauses.append(
            "overlay branches cannot rename directories that came from the project (EXDEV)"
        )
    return clauses


__all__ = ["limits_available", "unprivileged_limits"]
