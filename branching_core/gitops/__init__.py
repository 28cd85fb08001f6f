"""Git for the engine: the repository a workspace lives in, never a workspace change.

* ``state``: the parent repository's branch, HEAD, dirty files and in-progress state.
* ``refs``: commits made inside a branch kept as ``forkdeck/<fork>/<label>``.
* ``commit``: commit exactly the landed paths (temporary index; the user's staged and
  unstaged work elsewhere untouched).
* ``export``: a branch's change as a ``git apply``-able patch or a git branch.
* ``shadow``: a private git directory for a branch whose ``.git`` is a file pointing
  outside the workspace (worktrees, submodules).

Every call runs the ``git`` program (``_run``); nothing here imports the workspace.
"""

from branching_core.gitops._run import GitError
from branching_core.gitops.commit import GitCommitResult, check_branch_name, commit_paths, precheck
from branching_core.gitops.export import build_tree, export_branch, export_patch
from branching_core.gitops.message import landing_message, summary_line
from branching_core.gitops.refs import LandedCommits, fast_forward, land_branch_commits, ref_name
from branching_core.gitops.state import RepoState, repo_state

__all__ = [
    "GitCommitResult",
    "GitError",
    "LandedCommits",
    "RepoState",
    "build_tree",
    "check_branch_name",
    "commit_paths",
    "export_branch",
    "export_patch",
    "fast_forward",
    "land_branch_commits",
    "landing_message",
    "precheck",
    "ref_name",
    "repo_state",
    "summary_line",
]
