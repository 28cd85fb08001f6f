"""Issue 25.3: a fork's winner landed as a git commit of exactly its paths (real forks of
pydantic-ai Agents on FunctionModels, real git)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from branching_core.agent import SandboxCommandRunner
from branching_core.fork.git_landing import GitLanding
from branching_core.workspace import Workspace
from tests.review.forks import call, fork_with

from .repo import git, head, make_repo, porcelain


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_repo(
        tmp_path / "project",
        {"src/app.py": "VALUE = 1\n", "notes.txt": "mine\n", "staged.txt": "s\n"},
    )
    # the user's own work in progress: one staged change, one unstaged edit
    (root / "staged.txt").write_text("staged by the user\n")
    git(root, "add", "staged.txt")
    (root / "notes.txt").write_text("mine, edited\n")
    return root


async def two_way_fork(ws: Workspace):
    return await fork_with(
        ws,
        {
            "fast": [
                call("write_file", path="src/app.py", content="VALUE = 2\n"),
                call("write_file", path="src/new.py", content="NEW = True\n"),
                call("run_command", command="rm README.txt && echo junk > build.o"),
            ],
            "slow": [call("write_file", path="src/app.py", content="VALUE = 3\n")],
        },
        runner=SandboxCommandRunner(),
    )


def changed_between(root: Path, a: str, b: str) -> list[str]:
    return sorted(git(root, "diff", "--name-only", a, b).split())


async def test_merge_and_commit_exactly_the_winners_paths(repo: Path) -> None:
    ws = Workspace(repo)
    before = head(repo)
    coord = await two_way_fork(ws)
    result = await coord.merge_or_select("pick:fast", git=GitLanding(commit=True))
    assert result.git_commit is not None, result.git_notes
    assert git(repo, "rev-parse", "HEAD^").strip() == before  # exactly one commit on top
    assert head(repo) == result.git_commit
    # its tree differs from the old one exactly by the winner's paths (build.o is ignored)
    assert changed_between(repo, before, "HEAD") == ["README.txt", "src/app.py", "src/new.py"]
    # the user's unstaged edit is still unstaged, the staged change still staged only
    assert sorted(porcelain(repo).splitlines()) == [" M notes.txt", "M  staged.txt"]
    assert git(repo, "diff", "--cached", "--name-only").split() == ["staged.txt"]
    message = git(repo, "log", "-1", "--format=%B")
    assert message.startswith("Do fast\n")
    for trailer in ("Forkdeck-Fork: ", "Forkdeck-Branch: fast", "Forkdeck-Model: ",
                    "Forkdeck-Tests: "):
        assert trailer in message
    assert any(n.startswith("git: committed 3 path(s)") for n in result.git_notes)


async def test_message_new_branch_and_trailer_override(repo: Path) -> None:
    ws = Workspace(repo)
    coord = await two_way_fork(ws)
    landing = GitLanding(commit=True, message="Use the fast way", branch="feature/fast",
                         trailers={"Tests": "pytest -q: 3 passed"})
    result = await coord.merge_or_select("pick:fast", git=landing)
    assert git(repo, "symbolic-ref", "--short", "HEAD").strip() == "feature/fast"
    assert git(repo, "rev-parse", "main").strip() == git(repo, "rev-parse", "HEAD^").strip()
    message = git(repo, "log", "-1", "--format=%B")
    assert message.startswith("Use the fast way\n")
    assert "Forkdeck-Tests: pytest -q: 3 passed" in message
    assert result.git_commit == head(repo)


async def test_mid_merge_repository_lands_files_and_says_why(repo: Path) -> None:
    ws = Workspace(repo)
    coord = await two_way_fork(ws)
    (repo / ".git" / "MERGE_HEAD").write_text(head(repo) + "\n")
    before = head(repo)
    result = await coord.merge_or_select("pick:fast", git=GitLanding(commit=True))
    assert (repo / "src" / "app.py").read_text() == "VALUE = 2\n"  # files landed
    assert head(repo) == before and result.git_commit is None
    assert [n for n in result.git_notes if "middle of a merge" in n]


async def test_all_or_nothing_lands_nothing_when_git_cannot_commit(repo: Path) -> None:
    ws = Workspace(repo)
    coord = await two_way_fork(ws)
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(RuntimeError, match="nothing merged: git: HEAD is detached"):
        await coord.merge_or_select("pick:fast", git=GitLanding(commit=True, all_or_nothing=True))
    assert (repo / "src" / "app.py").read_text() == "VALUE = 1\n"
    # the fork is still open: the user can fix git and merge again
    git(repo, "checkout", "-q", "main")
    strict = GitLanding(commit=True, all_or_nothing=True)
    result = await coord.merge_or_select("pick:fast", git=strict)
    assert result.git_commit == head(repo)


async def test_failing_hook_lands_files_without_a_commit(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'lint failed: src/new.py' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    ws = Workspace(repo)
    coord = await two_way_fork(ws)
    before = head(repo)
    result = await coord.merge_or_select("pick:fast", git=GitLanding(commit=True))
    assert head(repo) == before and (repo / "src" / "new.py").exists()
    refused = "the pre-commit hook refused the commit: lint failed: src/new.py"
    assert f"git: not committed: {refused}" in result.git_notes
    # the user's index was not touched by the refused attempt
    assert git(repo, "diff", "--cached", "--name-only").split() == ["staged.txt"]


async def test_commit_merges_setting_commits_without_asking(repo: Path) -> None:
    (repo / ".pydantic-deep").mkdir()
    (repo / ".pydantic-deep" / "config.toml").write_text("[git]\ncommit_merges = true\n")
    ws = Workspace(repo)
    before = head(repo)
    coord = await two_way_fork(ws)
    result = await coord.merge_or_select("pick:slow")
    assert result.git_commit == head(repo) != before
    assert changed_between(repo, before, "HEAD") == ["src/app.py"]


async def test_flag_spelling_of_merge_or_select(repo: Path) -> None:
    ws = Workspace(repo)
    before = head(repo)
    coord = await two_way_fork(ws)
    result = await coord.merge_or_select("pick:slow", git_commit="Slow wins", git_branch="slow")
    assert git(repo, "symbolic-ref", "--short", "HEAD").strip() == "slow"
    assert git(repo, "log", "-1", "--format=%s").strip() == "Slow wins"
    assert result.git_commit == head(repo) and git(repo, "rev-parse", "HEAD^").strip() == before
