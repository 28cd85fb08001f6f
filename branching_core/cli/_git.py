"""The pattern commands' git options (issue 25): ``--git-commit[=MESSAGE]``,
``--git-branch NAME``, ``--git-ff``, ``--git-all-or-nothing``, and ``[git] commit_merges``.

The winner lands through the workspace's ordinary commit; this module watches that
commit (``BranchTree.before_commit``/``after_commit``): before it, the winner's own git
commits are kept as ``forkdeck/<pattern>/<index>``; after it, exactly the landed paths
are committed. Bad options (an invalid or taken branch name, and with
``--git-all-or-nothing`` a repository mid-merge or on a detached HEAD) are refused before
any candidate runs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core.cli._common import UsageError

if TYPE_CHECKING:
    from branching_core.gitops import LandedCommits
    from branching_core.patterns import SpeculationOutcome
    from branching_core.workspace import Workspace
    from branching_core.workspace.branch import Branch


def add_git_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--git-commit", nargs="?", const="", default=None, metavar="MESSAGE",
                   help="commit exactly the winner's landed paths (message: MESSAGE, else a "
                        "summary with Forkdeck-* trailers); [git] commit_merges = true does "
                        "this by default")
    p.add_argument("--git-branch", metavar="NAME",
                   help="make that commit on a new branch NAME (checked out in place)")
    p.add_argument("--git-ff", action="store_true",
                   help="fast-forward the current branch to commits the winner made itself")
    p.add_argument("--git-all-or-nothing", action="store_true",
                   help="land nothing when the git commit cannot be made")


@dataclass
class GitWatch:
    """What the winner's commit did in git, collected by the workspace's commit hooks."""

    root: Path
    commit: bool
    message: str | None
    branch: str | None
    fast_forward: bool
    landed: list[str] = field(default_factory=list)
    kept: LandedCommits | None = None
    notes: list[str] = field(default_factory=list)
    commit_id: str | None = None


def prepare(args: argparse.Namespace, ws: Workspace, command: str) -> GitWatch | None:
    """Check the git options and hook the workspace's commits; ``None`` when the
    workspace is not in a git repository and no git option was given."""
    from branching_core.gitops import repo_state

    commit = args.git_commit is not None or args.git_branch is not None
    if not commit:
        from branching_core.config.reading import load_settings

        commit = load_settings(Path(ws.path)).settings.git_commit_merges
    asked = commit or args.git_ff
    state = repo_state(ws.path, with_dirty=False)
    if state is None:
        if asked:
            raise UsageError(f"{command}: {ws.path} is not in a git repository")
        return None
    if commit:
        from branching_core.gitops import check_branch_name

        why = check_branch_name(ws.path, args.git_branch) if args.git_branch else None
        if why is None and args.git_all_or_nothing:
            why = state.refusal(new_branch=args.git_branch is not None)
        if why is not None:
            raise UsageError(f"{command}: git: {why}; nothing was run")
    watch = GitWatch(
        Path(ws.path), commit, args.git_commit or None, args.git_branch, args.git_ff
    )

    def before(branch: Branch) -> None:
        from branching_core.gitops import land_branch_commits, ref_name

        if branch.parent is not ws:
            return
        head, _, tail = branch.name.rpartition("-")
        watch.kept = land_branch_commits(
            branch.path, ws.path, ref_name(head or command, tail), write_layer=branch.write_layer
        )

    def after(branch: Branch, paths: list[str]) -> None:
        if branch.parent is ws:
            watch.landed = paths

    ws.tree.before_commit.append(before)
    ws.tree.after_commit.append(after)
    return watch


def finish(
    watch: GitWatch | None, outcome: SpeculationOutcome, labels: dict[int, str], *, command: str
) -> dict[str, Any] | None:
    """After the pattern: fast-forward and commit as asked; the ``git`` part of the
    command's output (``None`` when there is nothing to say)."""
    if watch is None:
        return None
    from branching_core.gitops import commit_paths, fast_forward, landing_message

    kept = watch.kept
    if kept is not None and watch.fast_forward and kept.commit is not None:
        try:
            kept.fast_forwarded = fast_forward(watch.root, kept.commit)
        except Exception as exc:
            watch.notes.append(f"git: fast-forward failed: {exc}")
        if kept.fast_forwarded is None:
            watch.notes.append("git: HEAD moved since the branch was made: no fast-forward")
    if kept is not None and kept.line is not None:
        watch.notes.insert(0, kept.line)
    winner = outcome.winner
    if watch.commit and outcome.committed and winner is not None:
        if not watch.landed:
            watch.notes.append("git: not committed: the winner changed nothing")
        else:
            label = labels.get(winner.branch_index)
            what = f"candidate {winner.branch_index}" + (f" ({label})" if label else "")
            message = landing_message(
                watch.message,
                trailers={
                    "Fork": winner.name.rpartition("-")[0] or command,
                    "Branch": str(winner.branch_index),
                    "Model": None,
                    "Tests": f"{command} winner: {winner.status}, score {winner.score:.2f}",
                },
                fallback=f"forkdeck {command}: land {what}"[:72],
            )
            result = commit_paths(watch.root, watch.landed, message, new_branch=watch.branch)
            watch.commit_id = result.commit
            watch.notes.append(result.line)
    if not watch.notes:
        return None
    return {
        "ref": kept.ref if kept is not None else None,
        "commit": watch.commit_id,
        "notes": watch.notes,
    }


__all__ = ["GitWatch", "add_git_options", "finish", "prepare"]
