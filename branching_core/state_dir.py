"""The project state directory ``<workspace>/.pydantic-deep/``: keeping it inside the
workspace and out of ``git status``.

Why a module of its own at the top of the package: the settings and the fork store both
write there, and a repository can ship ``.pydantic-deep`` (or ``.pydantic-deep/config.toml``)
as a symlink to ``~/.bashrc`` or any other file of the user's. Every writer asks
:func:`escape_target` first and refuses when the answer is not None, so forkdeck never
writes (nor backs up) through a link that leaves the workspace. And every writer calls
:func:`ensure_gitignore`, so forks, backups and mirrors never show up as untracked files
while ``config.toml`` stays committable.

Imports only the standard library and :mod:`branching_core.atomicio` (top layer).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from branching_core.atomicio import atomic_write

STATE_DIR = ".pydantic-deep"
GITIGNORE = ".gitignore"
GITIGNORE_TEXT = (
    "# Written by forkdeck. Everything here is local working state (forks/, branches,\n"
    "# mirrors, judge logs, config backups), except config.toml, which you may commit.\n"
    "*\n"
    "!config.toml\n"
)


def escape_target(workspace_root: Path | str, path: Path | str) -> str | None:
    """Where ``path`` really leads when that is outside ``workspace_root``, else None.

    Every symlink on the way is followed (the state directory itself, the file, any
    component), as a write or an open would follow them. A path that does not exist yet is
    judged by the part that does.
    """
    root = os.path.realpath(workspace_root)
    real = os.path.realpath(path)
    if real == root or real.startswith(root.rstrip("/") + "/"):
        return None
    return real


def ensure_gitignore(workspace_root: Path | str) -> None:
    """Write ``.pydantic-deep/.gitignore`` when the state directory exists without one.

    Best effort and idempotent: a directory that leads outside the workspace, or that cannot
    be written, is left alone (its writer reports the real problem).
    """
    state = Path(workspace_root) / STATE_DIR
    target = state / GITIGNORE
    try:
        if not state.is_dir() or os.path.lexists(target):
            return
        if escape_target(workspace_root, target) is not None:
            return
        with contextlib.suppress(OSError):
            atomic_write(target, GITIGNORE_TEXT.encode())
    except OSError:
        return


__all__ = ["GITIGNORE", "GITIGNORE_TEXT", "STATE_DIR", "ensure_gitignore", "escape_target"]
