"""Running ``git`` for the engine: one place for its environment and its errors.

Every call is a plain subprocess with a fixed locale, no pager, no prompt, literal
pathspecs (a landed file named ``*.py`` means that file) and no automatic gc, so the
engine's git work never waits on a terminal and never rewrites the user's repository
behind its back.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from branching_core.errors import BranchingError


class GitError(BranchingError):
    """A git command failed (or git is missing); the message is one line."""


_BASE_ENV = {
    "LC_ALL": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_LITERAL_PATHSPECS": "1",
    "GIT_OPTIONAL_LOCKS": "0",
}
# identity and config the user may have set for their own git stay in effect; the
# variables that would point git at another repository do not
_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")


@functools.cache
def git_binary() -> str | None:
    return shutil.which("git")


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP}
    env.update(_BASE_ENV)
    if extra:
        env.update(extra)
    return env


def git(
    args: Sequence[str],
    *,
    cwd: Path | str | None = None,
    git_dir: Path | str | None = None,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git args`` (in ``cwd``, or on ``git_dir`` alone: a branch view reached
    through ``/proc/<pid>/root`` has no usable working directory for git, see
    ``docs/git.md``); raises :class:`GitError` with git's first error line."""
    exe = git_binary()
    if exe is None:
        raise GitError("git is not installed")
    argv = [exe, "-c", "gc.auto=0", "-c", "maintenance.auto=false"]
    if git_dir is not None:
        argv += ["--git-dir", str(git_dir)]
    argv += list(args)
    proc = subprocess.run(
        argv,
        cwd=str(cwd) if cwd is not None else None,
        input=input,
        env=git_env(env),
        capture_output=True,
        check=False,
    )
    if check and proc.returncode != 0:
        raise GitError(f"git {args[0]} failed: {first_line(proc.stderr or proc.stdout)}")
    return proc


def out(
    args: Sequence[str],
    *,
    cwd: Path | str | None = None,
    git_dir: Path | str | None = None,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """``git args``'s stdout, stripped."""
    proc = git(args, cwd=cwd, git_dir=git_dir, input=input, env=env)
    return proc.stdout.decode("utf-8", "surrogateescape").strip()


def first_line(data: bytes) -> str:
    for line in data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line and not line.startswith("hint:"):
            return line.removeprefix("fatal: ").removeprefix("error: ")
    return "no message"


__all__ = ["GitError", "first_line", "git", "git_binary", "git_env", "out"]
