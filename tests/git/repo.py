"""Real git repositories for the git tests (issue 25)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test User",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test User",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def git(root: Path, *args: str, check: bool = True, input: bytes | None = None) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=root,
        env={**os.environ, **IDENTITY},
        capture_output=True,
        input=input,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr.decode()}")
    return proc.stdout.decode()


def make_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    """A repository with one commit of ``files`` (and a .gitignore ignoring *.o)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", IDENTITY["GIT_AUTHOR_NAME"])
    git(root, "config", "user.email", IDENTITY["GIT_AUTHOR_EMAIL"])
    for rel, text in {"README.txt": "hello\n", ".gitignore": "*.o\n", **(files or {})}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def porcelain(root: Path) -> str:
    return git(root, "status", "--porcelain=v1", "--untracked-files=all")
