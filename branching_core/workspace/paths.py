"""Which relative paths can ever be a workspace change, and which are well formed.

Why one module: "is this path internal (project state, our store), never a workspace
change" was answered in six places (the landing function, combine, the mirror, the
cluster snapshot, the overlay collector, the tree scanner), each with its own copy of
``".pydantic-deep"``. A new kind of internal path (the git integration's ``.git``
internals) must be added here, once, and every landing path, the mirror and the change
collectors then agree. :func:`path_problem` is the syntax half of the landing rule: what
a path received from a branch, a node or a caller must look like before anything is
looked up with it.

Internal entries:

* ``.pydantic-deep`` at the top level: forkdeck's own project state (forks, config,
  commit scratch). Branch views hide it. ``.forkdeck-stores`` likewise (a branch store).
* ``.git`` at any depth: a repository (the project's, a submodule's, a nested clone's),
  or the ``gitdir:`` file of a worktree or submodule. Branch views show it, so git works
  inside a branch, but its internals (index, HEAD, refs, objects) are never a change: not
  in ``changes()``, a diff report, the mirror, a combine, a conflict check or a landing.
  Git itself never tracks a path with a ``.git`` component, so no project file is lost.
"""

from __future__ import annotations

from branching_core.state_dir import STATE_DIR  # the project state dir: one name, one object

STATE_DIR_NAME = STATE_DIR

GIT_NAME = ".git"
"""A repository or a worktree's ``gitdir:`` file, at any depth: never a change."""

STORE_DIR = ".forkdeck-stores"
"""Where a branch store lives when it cannot live in the user's cache: beside a
workspace, so inside any workspace that contains that one."""

INTERNAL_TOP: frozenset[str] = frozenset({STATE_DIR, STORE_DIR})
"""Top-level names that are never workspace content."""

MAX_PATH_BYTES = 4096
"""PATH_MAX: a longer relative path cannot be opened in one call anyway."""

MAX_NAME_BYTES = 255
"""NAME_MAX of every Linux filesystem we run on."""


def is_internal_path(rel: str) -> bool:
    """True for a path (relative to a workspace or branch root, ``/``-separated) that is
    forkdeck's own state and never a workspace change: it is not collected, mirrored,
    shipped or landed. A top-level name counts, and everything below it; ``.git`` counts
    at any depth."""
    parts = rel.split("/")
    return parts[0] in INTERNAL_TOP or GIT_NAME in parts


def path_problem(rel: object) -> str | None:
    """Why ``rel`` cannot name an entry inside a workspace, else None.

    Accepted: a non-empty ``str`` of ``/``-separated names, none empty, ``.`` or ``..``,
    without NUL, within PATH_MAX/NAME_MAX, not internal (:func:`is_internal_path`).
    Deliberately strict (``a//b`` and ``./a`` are refused, not normalised): a path that
    means something else once normalised is a path nobody honest sends.
    """
    if not isinstance(rel, str):
        return f"{rel!r}: a path must be a string"
    if not rel:
        return "an empty path"
    if "\0" in rel:
        return f"{rel!r}: a path with a NUL byte"
    if rel.startswith("/"):
        return f"{_cut(rel)}: an absolute path"
    try:
        size = len(rel.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return f"{_cut(rel)}: not encodable as a file name"
    if size > MAX_PATH_BYTES:
        return f"{_cut(rel)}: longer than {MAX_PATH_BYTES} bytes"
    for part in rel.split("/"):
        if part in ("", ".", ".."):
            shown = repr(part) if part else "an empty"
            return f"{_cut(rel)}: contains {shown} component"
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            return f"{_cut(rel)}: a name longer than {MAX_NAME_BYTES} bytes"
    if is_internal_path(rel):
        top = rel.split("/", 1)[0]
        if top in INTERNAL_TOP:
            return f"{_cut(rel)}: forkdeck's own state ({top}), not workspace content"
        return f"{_cut(rel)}: inside a .git (the repository, never a workspace change)"
    return None


def _cut(rel: str, limit: int = 80) -> str:
    text = repr(rel)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


__all__ = [
    "GIT_NAME",
    "INTERNAL_TOP",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "STATE_DIR",
    "STATE_DIR_NAME",
    "STORE_DIR",
    "is_internal_path",
    "path_problem",
]
