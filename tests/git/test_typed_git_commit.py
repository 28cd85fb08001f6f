""""And commit to git" spelled as a typed ``MergeAction`` (what the TUI passes, issue 23):
the pick's ``GitCommitRequest`` carries message, branch and trailers (the picker's test
result) to the same landing commit ``git=GitLanding(...)`` makes."""

from __future__ import annotations

from pathlib import Path

from branching_core import GitCommitRequest, MergeAction
from branching_core.workspace import Workspace

from .repo import git, head
from .test_landing_commit import repo, two_way_fork

__all__ = ["repo"]  # the fixture, shared with the GitLanding spelling's tests


async def test_a_typed_pick_with_a_commit_request_commits_with_its_trailers(repo: Path) -> None:
    coord = await two_way_fork(Workspace(repo))
    request = GitCommitRequest(message="Use the fast way", branch="feature/fast",
                               trailers={"Tests": "pytest -q: 3 passed"})
    result = await coord.merge_or_select(MergeAction.pick("fast", git_commit=request))
    assert result.git_commit == head(repo)
    assert git(repo, "symbolic-ref", "--short", "HEAD").strip() == "feature/fast"
    message = git(repo, "log", "-1", "--format=%B")
    assert message.startswith("Use the fast way\n")
    assert "Forkdeck-Tests: pytest -q: 3 passed" in message
    assert "Forkdeck-Branch: fast" in message
