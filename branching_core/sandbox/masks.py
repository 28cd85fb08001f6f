"""What a sandbox hides beyond the read-only host: branch stores (and, later, secrets).

Decided in the caller (paths, environment), applied in the child by mounting an empty
read-only tmpfs over each directory. The branch's own view is grabbed before anything
is covered and mounted back on top, so it stays reachable at its path.

Branch stores hold every branch's uncommitted files (``<store>/<branch>/view``): a
branch must not read its siblings' work, nor other workspaces' branches. A store root
is recognised by its ``workspace`` marker file; the places stores are kept by default
(``$FORKDECK_STORE``, ``~/.cache/forkdeck/stores``, ``.forkdeck-stores`` beside a
workspace) are hidden whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from branching_core.workspace.store import STORE_ENV

_STORE_MARKER = "workspace"
_STORE_BASE_NAME = ".forkdeck-stores"


def _is_store_root(path: str) -> bool:
    return (os.path.isfile(os.path.join(path, _STORE_MARKER))
            and os.path.isdir(os.path.join(path, "sessions")))


def _ancestors(path: str) -> list[str]:
    out = []
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent


def store_dirs(view: str, target: str) -> list[str]:
    """Store directories to hide for a sandbox showing ``view`` at ``target``."""
    found: list[str] = []
    explicit = os.environ.get(STORE_ENV)
    if explicit:
        found.append(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    found.append(os.path.join(cache, "forkdeck", "stores"))
    for place in (view, target):
        found.append(os.path.join(os.path.dirname(place), _STORE_BASE_NAME))
        for ancestor in _ancestors(place):
            if os.path.basename(ancestor) == _STORE_BASE_NAME:
                found.append(ancestor)
            elif _is_store_root(ancestor):  # an explicit Workspace(store=...)
                found.append(ancestor)
                break
    return [p for p in found if _is_dir(p)]


def _is_dir(path: str) -> bool:
    try:
        return os.path.isdir(path) and not os.path.islink(path)
    except OSError:
        return False


def outermost(paths: Iterable[str]) -> tuple[str, ...]:
    """Real, absolute, de-nested paths (a path inside another is dropped); ``/`` is
    refused: hiding it would hide the whole host."""
    real = sorted({os.path.realpath(p) for p in paths} - {"/"})
    kept: list[str] = []
    for path in real:
        if not any(path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return tuple(kept)


__all__ = ["outermost", "store_dirs"]
