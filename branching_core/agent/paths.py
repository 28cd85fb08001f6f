"""Resolve a model-supplied path inside a workspace root without ever leaving it.

Why not ``Path.resolve()``: a branch view may be reached as ``/proc/<pid>/root/...`` (the
overlay owned by a helper process). ``resolve()`` follows that magic link and ends up in
a different namespace, and it treats the host's ``/`` as the top, not the workspace. So
this module walks the path one component at a time with ``os.lstat``/``os.readlink``,
treats the root as the boundary (``..`` at the root is an escape, not a no-op), and
follows symlinks itself, refusing any whose target lands outside the root. The root is
never resolved, never ``chdir``-ed into, and the current directory is never consulted.

Known limit: this is a check-then-use resolver. A concurrent process (for example the
branch's own shell command) could swap a directory for a symlink between the check and
the use. Callers open the final component with ``O_NOFOLLOW``, which closes the last
hop; the shell commands themselves run in the branch sandbox, which is the real fence.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from branching_core.errors import BranchingError

HIDDEN_NAMES: frozenset[str] = frozenset({".pydantic-deep"})
"""Directory names that are project state, not workspace content: never shown, read or written."""

MAX_SYMLINK_HOPS = 40
"""Same bound as the kernel's ELOOP limit."""


class UnsafePathError(BranchingError, ValueError):
    """A path is absolute, escapes the root (by ``..`` or a symlink), names hidden state, or
    cannot be walked at all (a name too long, a directory that cannot be searched)."""


def shown_path(path: str, limit: int = 80) -> str:
    """``repr(path)`` cut to ``limit`` characters: a 300-character name should not be echoed
    back whole in every error message."""
    text = repr(path)
    return text if len(text) <= limit else f"{text[: limit - 12]}...' ({len(path)} chars)"


def _split(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def resolve_in_root(root: Path, path: str, *, follow_final: bool = True) -> Path:
    """Return ``root``/``path`` with every symlink followed, guaranteed to stay inside ``root``.

    ``path`` must be relative (``''`` and ``'.'`` mean the root). Components that do not
    exist yet are accepted (so a file can be created), as long as the path reached by then
    is inside the root. With ``follow_final=False`` a symlink in the last component is
    returned as is (to delete or describe the link itself, never what it points to).

    Raises :class:`UnsafePathError` with a message a model can act on.
    """
    if "\x00" in path:
        raise UnsafePathError("path contains a NUL byte")
    if path.startswith("/"):
        raise UnsafePathError(
            f"absolute paths are not allowed ({shown_path(path)}); "
            "use a path relative to the workspace root"
        )
    root_str = os.path.normpath(os.fspath(root))
    pending = _split(path)
    pending.reverse()  # a stack: the next component to resolve is at the end
    resolved: list[str] = []
    hops = 0
    while pending:
        name = pending.pop()
        if name == "..":
            if not resolved:
                raise UnsafePathError(f"{shown_path(path)} escapes the workspace root")
            resolved.pop()
            continue
        if name in HIDDEN_NAMES:
            raise UnsafePathError(
                f"{shown_path(path)} is inside {name}/, which is project state, not workspace"
            )
        candidate = os.path.join(root_str, *resolved, name)
        try:
            st = os.lstat(candidate)
        except (FileNotFoundError, NotADirectoryError):
            resolved.append(name)  # does not exist (yet): nothing to follow
            continue
        except OSError as exc:  # ENAMETOOLONG, EACCES, ELOOP, EIO: the path cannot be walked
            raise UnsafePathError(
                f"{shown_path(path)} cannot be used: {exc.strerror or exc}"
            ) from None
        if not stat.S_ISLNK(st.st_mode) or (not pending and not follow_final):
            resolved.append(name)
            continue
        hops += 1
        if hops > MAX_SYMLINK_HOPS:
            raise UnsafePathError(f"{shown_path(path)}: too many levels of symbolic links")
        try:
            target = os.readlink(candidate)
        except OSError as exc:  # the link vanished or changed under us
            raise UnsafePathError(
                f"{shown_path(path)} cannot be used: {exc.strerror or exc}"
            ) from None
        if target.startswith("/"):
            norm = os.path.normpath(target)
            if norm != root_str and not norm.startswith(root_str.rstrip("/") + "/"):
                shown = "/".join([*resolved, name])
                raise UnsafePathError(
                    f"{shown_path(path)}: symlink {shown!r} points outside the workspace"
                )
            resolved = []
            target = norm[len(root_str) :]
        parts = _split(target)
        pending.extend(reversed(parts))
    return Path(root_str, *resolved)


def relative_to_root(root: Path, path: Path) -> str:
    """The root-relative, ``/``-separated spelling of a path produced by :func:`resolve_in_root`."""
    rel = os.path.relpath(os.fspath(path), os.path.normpath(os.fspath(root)))
    return "." if rel == "." else rel.replace(os.sep, "/")


__all__ = [
    "HIDDEN_NAMES",
    "MAX_SYMLINK_HOPS",
    "UnsafePathError",
    "relative_to_root",
    "resolve_in_root",
    "shown_path",
]
