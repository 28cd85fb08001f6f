# pyright: strict
"""One lock per parent for landing a branch into it (DESIGN.md: "one way to land a branch
into its parent (one lock per parent)").

Fork merges (``branching_core.fork.merge``) and sub-agent landings
(``branching_core.live.subagents.merge``) both take :func:`landing_lock` of the parent
they land in, so the stale check and the commit of two landings never interleave. It
lives in the workspace layer because both of those layers may import it.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any

_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def landing_lock(parent: Any) -> asyncio.Lock:
    """The one lock for landing anything (a sub-agent's branch, a fork's winner) into
    ``parent`` (a ``Workspace`` or ``Branch``): keyed by its path, per event loop."""
    locks = _LOCKS.setdefault(asyncio.get_running_loop(), {})
    key = os.path.abspath(parent.path)  # not realpath: /proc/<pid>/root views are magic links
    lock = locks.get(key)
    if lock is None:
        lock = locks[key] = asyncio.Lock()
    return lock


__all__ = ["landing_lock"]
