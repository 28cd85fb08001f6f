"""A fork merge's git side (issue 25): the winner's own commits kept as a ref, and the
landed files committed, when asked.

``GitLanding`` is what the caller asks for (typed, never a string to parse). The merge
calls :func:`keep_branch_commits` while the winner's view is still there (before its
files land) and :func:`after_landing` once they have: fast-forward, then the landing
commit. Neither raises for the repository's state: each outcome is a one-line note in
``MergeResult.git_notes``; the files land regardless, unless ``all_or_nothing`` was asked,
in which case :func:`refusal` is checked before anything lands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branching_core.gitops import (
    GitCommitResult,
    LandedCommits,
    commit_paths,
    fast_forward,
    land_branch_commits,
    landing_message,
    precheck,
    ref_name,
)


@dataclass(frozen=True)
class GitLanding:
    """What to do in git when a winner lands.

    ``commit``: commit exactly the landed paths (on the current branch, or on a new
    ``branch`` checked out in place); ``message``: the commit message (default: a summary
    of the branch's steer); ``fast_forward``: move the current branch to the commits made
    inside the winner when HEAD has not moved; ``all_or_nothing``: land nothing when the
    commit cannot be made (mid-merge, detached HEAD, a bad branch name); ``trailers``:
    extra ``Forkdeck-<key>: value`` lines (e.g. ``{"Tests": "pytest -q: passed"}``).
    """

    commit: bool = False
    message: str | None = None
    branch: str | None = None
    fast_forward: bool = False
    all_or_nothing: bool = False
    trailers: dict[str, str] = field(default_factory=dict)


@dataclass
class GitOutcome:
    """What the git side of one merge did (copied into ``MergeResult``)."""

    kept: LandedCommits | None = None
    commit: GitCommitResult | None = None
    notes: list[str] = field(default_factory=list)


def refusal(git: GitLanding | None, parent_dir: Path) -> str | None:
    """For all-or-nothing landings: why the commit cannot be made, checked up front."""
    if git is None or not git.commit or not git.all_or_nothing:
        return None
    return precheck(parent_dir, new_branch=git.branch)


def keep_branch_commits(
    ws_branch: Any, parent_dir: Path, fork_id: str, label: str
) -> LandedCommits:
    """Fetch the winner's own commits into the parent as ``forkdeck/<fork>/<label>``."""
    return land_branch_commits(
        Path(ws_branch.path),
        parent_dir,
        ref_name(fork_id, label),
        write_layer=Path(ws_branch.write_layer),
    )


def after_landing(
    git: GitLanding | None,
    outcome: GitOutcome,
    parent_dir: Path,
    landed: list[str],
    *,
    in_workspace: bool,
    steer: str | None,
    trailers: dict[str, str | None],
) -> None:
    """Fast-forward and commit, as asked; notes go to ``outcome.notes``."""
    kept = outcome.kept
    if kept is not None and kept.line is not None and not (git and git.fast_forward):
        outcome.notes.append(kept.line)
    if git is None:
        return
    if git.fast_forward and kept is not None and kept.commit is not None:
        if not in_workspace:
            outcome.notes.append("git: no fast-forward inside a branch view")
        else:
            try:
                kept.fast_forwarded = fast_forward(parent_dir, kept.commit)
            except Exception as exc:  # a one-line note, never a failed merge
                outcome.notes.append(f"git: fast-forward failed: {exc}")
            if kept.line is not None:
                outcome.notes.append(kept.line)
            if kept.fast_forwarded is None:
                outcome.notes.append("git: HEAD moved since the fork: no fast-forward")
    if not git.commit:
        return
    if not in_workspace:
        outcome.notes.append("git: not committed: the parent is a branch view, not the workspace")
        return
    if not landed:
        outcome.notes.append("git: not committed: nothing landed")
        return
    message = landing_message(git.message, steer=steer, trailers={**trailers, **git.trailers})
    outcome.commit = commit_paths(parent_dir, landed, message, new_branch=git.branch)
    outcome.notes.append(outcome.commit.line)


def trailers_for(fork_id: str, label: str, model: Any) -> dict[str, str | None]:
    """The trailers every landing commit of a fork branch carries."""
    name = model if isinstance(model, str) or model is None else getattr(model, "model_name", None)
    return {"Fork": fork_id, "Branch": label, "Model": name or "default", "Tests": "not run"}


__all__ = [
    "GitLanding",
    "GitOutcome",
    "after_landing",
    "keep_branch_commits",
    "refusal",
    "trailers_for",
]
