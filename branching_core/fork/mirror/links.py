"""What a branch's symlink becomes in the mirror: the same link, or a dead one.

Why: the mirror lives deeper than the branch (``.pydantic-deep/forks/<id>/branches/<dir>/``)
and is opened in the user's IDE, outside every sandbox. A link the model made in its
branch (``notes.txt -> ~/.bashrc``, or ``../../../../../src/app.py``, which from the deeper
mirror folder lands in the parent workspace) would receive the user's next save there.
So a link keeps its text only when, resolved from where it sits, it stays inside the
branch: then it means in the mirror what it means in the branch (the mirror's root is
the branch's root). Any other link is mirrored as a link that cannot lead anywhere:
``.forkdeck-link-outside-branch/=<the original target, quoted into one name>``. Its
directory never exists, so an in-place save through it fails (ENOENT) instead of writing
elsewhere, and a save by "write a temporary file + rename" replaces the dead link with a
file, which the edit watcher refuses to apply over the branch's symlink. The diff shows
the original target in the name.
"""

from __future__ import annotations

import posixpath
from urllib.parse import quote

DEAD_LINK_DIR = ".forkdeck-link-outside-branch"


def leaves_root(rel: str, target: str) -> bool:
    """Does the link at ``rel`` (relative to a root) with ``target`` lead outside the root,
    judged by its text (absolute, or more ``..`` than it is deep)?"""
    if target.startswith("/") or not target:
        return True
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return joined == ".." or joined.startswith("../") or joined.startswith("/")


def mirrored_target(rel: str, target: str) -> str:
    """The target the mirror gives the link at ``rel`` (module doc); idempotent."""
    if not leaves_root(rel, target):
        return target
    return f"{DEAD_LINK_DIR}/={quote(target, safe='')}"


__all__ = ["DEAD_LINK_DIR", "leaves_root", "mirrored_target"]
