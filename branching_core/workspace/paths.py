"""The one predicate for "never a workspace change": :func:`is_internal_path`.

Two kinds of entries live in a workspace without being its content:

* ``.pydantic-deep`` at the top level: forkdeck's own project state (forks, config,
  commit scratch). Branch views hide it.
* ``.git`` at any depth: a repository (the project's, a submodule's, a nested clone's),
  or the ``gitdir:`` file of a worktree or submodule. Branch views show it, so git works
  inside a branch, but its internals (index, HEAD, refs, objects) are never a change: not
  in ``changes()``, a diff report, the mirror, a combine, a conflict check or a landing.
  Git itself never tracks a path with a ``.git`` component, so no project file is lost.
"""

from __future__ import annotations

STATE_DIR_NAME = ".pydantic-deep"
GIT_NAME = ".git"


def is_internal_path(rel: str) -> bool:
    """True when ``rel`` (relative, POSIX) is forkdeck's state or lies in a ``.git``."""
    parts = rel.split("/")
    return parts[0] == STATE_DIR_NAME or GIT_NAME in parts


__all__ = ["GIT_NAME", "STATE_DIR_NAME", "is_internal_path"]
