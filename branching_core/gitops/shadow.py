"""A private git directory for a branch whose ``.git`` is a file (worktree, submodule).

A worktree's or submodule's ``.git`` is a ``gitdir: <path>`` file pointing outside the
workspace, so the branch's copy-on-write view would share that git directory with the
user: a ``git commit`` in the branch would move the user's real HEAD, index and refs
(outside a sandbox), or fail on a read-only file system (inside one). Chosen instead:
when such a branch is made, its view gets its own ``.git`` directory, a small repository
that borrows every object of the real one through ``objects/info/alternates`` (read
only) and starts from copies of its HEAD, index, refs, config and excludes. Git then
works in the branch exactly as in the workspace, and every write (objects, index, refs)
stays in the branch; ``.git`` is never a workspace change, so none of it lands. Commits
made there are kept at merge like any branch's (``refs``). Cost: copying the index and
the refs, once per branch (not the objects, not the files).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from branching_core.gitops._run import git


def external_gitdir(root: Path) -> Path | None:
    """The git directory ``root/.git`` (a ``gitdir:`` file) points to, when it lies
    outside ``root``; ``None`` for a ``.git`` directory or no ``.git`` at all."""
    dotgit = root / ".git"
    if not dotgit.is_file() or dotgit.is_symlink():
        return None
    try:
        text = dotgit.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text.removeprefix("gitdir:").strip())
    gitdir = (target if target.is_absolute() else root / target).resolve()
    if not gitdir.is_dir() or gitdir.is_relative_to(root.resolve()):
        return None
    return gitdir


def make_private_gitdir(view: Path, gitdir: Path) -> None:
    """Replace ``view/.git`` (the gitfile) with a private repository borrowing the
    objects of ``gitdir`` (see the module's docstring)."""
    common = gitdir
    commondir = gitdir / "commondir"
    if commondir.is_file():
        rel = commondir.read_text().strip()
        common = (gitdir / rel).resolve() if not Path(rel).is_absolute() else Path(rel)
    dotgit = view / ".git"
    staging = view / ".git.forkdeck-new"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "objects" / "info").mkdir(parents=True)
    (staging / "objects" / "pack").mkdir()
    (staging / "info").mkdir()
    (staging / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n")
    shutil.copyfile(gitdir / "HEAD", staging / "HEAD")
    for name, source in (("index", gitdir / "index"), ("packed-refs", common / "packed-refs"),
                         ("shallow", common / "shallow"), ("config", common / "config")):
        if source.is_file():
            shutil.copyfile(source, staging / name)
    if (common / "info" / "exclude").is_file():
        shutil.copyfile(common / "info" / "exclude", staging / "info" / "exclude")
    if (common / "refs").is_dir():
        shutil.copytree(common / "refs", staging / "refs", symlinks=True)
    else:
        (staging / "refs" / "heads").mkdir(parents=True)
    if (gitdir / "refs").is_dir() and gitdir != common:  # per-worktree refs (bisect...)
        shutil.copytree(gitdir / "refs", staging / "refs", symlinks=True, dirs_exist_ok=True)
    config = str(staging / "config")
    for key in ("core.worktree", "core.bare"):
        git(["config", "--file", config, "--unset-all", key], check=False)
    hooks = git(["config", "--file", config, "core.hooksPath"], check=False)
    if hooks.returncode != 0 and (common / "hooks").is_dir():
        git(["config", "--file", config, "core.hooksPath", str(common / "hooks")])
    os.unlink(dotgit)
    os.rename(staging, dotgit)


def borrowed_objects(view: str | os.PathLike[str]) -> list[str]:
    """The object directories ``view``'s git directory borrows (its alternates), real
    paths: a sandbox of the branch must be able to read them."""
    try:
        text = (Path(view) / ".git" / "objects" / "info" / "alternates").read_text()
    except (OSError, UnicodeDecodeError):
        return []
    return [os.path.realpath(line) for line in text.splitlines() if line.startswith("/")]


__all__ = ["borrowed_objects", "external_gitdir", "make_private_gitdir"]
