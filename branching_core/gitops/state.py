"""What the parent repository looks like right now: the merge picker's git line, and the
pre-checks a landing commit needs (mid-merge, detached HEAD, unborn branch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from branching_core.gitops._run import GitError, git, out

# (file or directory in the git dir, what the repository is in the middle of)
_IN_PROGRESS = (
    ("rebase-merge", "a rebase"),
    ("rebase-apply", "a rebase or am"),
    ("MERGE_HEAD", "a merge"),
    ("CHERRY_PICK_HEAD", "a cherry-pick"),
    ("REVERT_HEAD", "a revert"),
    ("BISECT_LOG", "a bisect"),
)


@dataclass
class RepoState:
    """A git repository holding a workspace (``None`` from :func:`repo_state` if none).

    ``prefix``: the workspace's path inside the repository ("" at its top, else ending
    in "/"); ``branch``: the current branch (``None`` when HEAD is detached); ``head``:
    HEAD's commit (``None`` on an unborn branch); ``in_progress``: "a merge", "a rebase"...
    or ``None``; ``dirty``: paths (relative to the workspace) with staged or unstaged
    changes or untracked, as ``git status`` lists them.
    """

    toplevel: Path
    git_dir: Path
    prefix: str
    branch: str | None
    head: str | None
    in_progress: str | None
    dirty: list[str] = field(default_factory=list)

    def dirty_outside(self, paths: list[str] | set[str]) -> list[str]:
        """Dirty paths that are neither one of ``paths`` nor inside one of them."""
        keep = set(paths)
        return [
            p
            for p in self.dirty
            if p not in keep and not any(p.startswith(k.rstrip("/") + "/") for k in keep)
        ]

    def refusal(self, *, new_branch: bool = False) -> str | None:
        """Why a landing commit cannot be made here (one line), or ``None``."""
        if self.in_progress:
            return (
                f"the repository is in the middle of {self.in_progress}: finish or abort it, "
                "then commit the landed files yourself"
            )
        if self.branch is None and not new_branch:
            return "HEAD is detached: give a branch to commit on (--git-branch NAME)"
        return None

    def line(self, winner_paths: list[str] | set[str] | None = None) -> str:
        """One line for the merge picker: branch, HEAD, what else is dirty."""
        where = f"on {self.branch}" if self.branch else "HEAD detached"
        head = self.head[:8] if self.head else "no commits yet"
        others = self.dirty if winner_paths is None else self.dirty_outside(winner_paths)
        dirty = (
            f"{len(others)} other dirty file{'s' if len(others) != 1 else ''}"
            if others
            else "no other dirty files"
        )
        busy = f", in the middle of {self.in_progress}" if self.in_progress else ""
        return f"git: {where} at {head}, {dirty}{busy}"


def repo_state(root: Path | str, *, with_dirty: bool = True) -> RepoState | None:
    """The repository holding ``root`` (a real path, not a branch view), or ``None``."""
    root = Path(root)
    try:
        info = out(
            ["rev-parse", "--show-toplevel", "--absolute-git-dir", "--show-prefix"], cwd=root
        ).split("\n")
    except (GitError, OSError):
        return None
    if len(info) < 2:
        return None
    toplevel, git_dir = Path(info[0]), Path(info[1])
    prefix = info[2] if len(info) > 2 else ""
    branch_proc = git(["symbolic-ref", "-q", "--short", "HEAD"], cwd=root, check=False)
    branch = branch_proc.stdout.decode().strip() if branch_proc.returncode == 0 else None
    head_proc = git(["rev-parse", "-q", "--verify", "HEAD^{commit}"], cwd=root, check=False)
    head = head_proc.stdout.decode().strip() if head_proc.returncode == 0 else None
    in_progress = next((what for name, what in _IN_PROGRESS if (git_dir / name).exists()), None)
    state = RepoState(toplevel, git_dir, prefix, branch, head, in_progress)
    if with_dirty:
        state.dirty = _dirty(root)
    return state


def _dirty(root: Path) -> list[str]:
    """Paths relative to ``root`` that ``git status`` lists (only under ``root``)."""
    data = git(
        ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--", "."],
        cwd=root,
    ).stdout
    prefix = out(["rev-parse", "--show-prefix"], cwd=root)
    paths = []
    for entry in data.split(b"\0"):
        if len(entry) > 3:
            rel = entry[3:].decode("utf-8", "surrogateescape")
            paths.append(rel[len(prefix):] if prefix and rel.startswith(prefix) else rel)
    return sorted(set(paths))


__all__ = ["RepoState", "repo_state"]
