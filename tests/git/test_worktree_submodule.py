"""Issue 25.1 for repositories whose ``.git`` is a file: a ``git worktree add`` workspace
and a submodule workspace. Git works inside the branch (status, add, commit) through the
branch's private git directory; the user's real HEAD, index and refs never move; the
branch's commits are kept at merge; nothing of ``.git`` lands."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from branching_core.agent import SandboxCommandRunner
from branching_core.fork.git_landing import GitLanding
from branching_core.sandbox import run_command
from branching_core.workspace import Workspace
from tests.review.forks import call, fork_with

from .repo import git, head, make_repo, porcelain

WORK = (
    "git status --short && echo changed > README.txt && git add README.txt && "
    "git -c user.name=b -c user.email=b@x commit -q -m 'in branch' && git log --format=%s -1"
)


def fingerprint(gitdir: Path, common: Path) -> tuple[str, ...]:
    """What must never change: the real HEAD and index (of this checkout), and every ref."""
    digest = [
        hashlib.sha256((gitdir / name).read_bytes()).hexdigest()
        for name in ("HEAD", "index")
        if (gitdir / name).exists()
    ]
    return (*digest, git(common.parent, "--git-dir", str(common), "for-each-ref"))


@pytest.fixture(params=["auto", "copy"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def worktree(tmp_path: Path) -> tuple[Path, Path, Path]:
    main = make_repo(tmp_path / "main")
    wt = tmp_path / "wt"
    git(main, "worktree", "add", "-q", "-b", "side", str(wt))
    return wt, main / ".git" / "worktrees" / "wt", main / ".git"


@pytest.fixture
def submodule(tmp_path: Path) -> tuple[Path, Path, Path]:
    lib = make_repo(tmp_path / "lib", {"lib.py": "X = 1\n"})
    outer = make_repo(tmp_path / "outer")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(outer, "commit", "-q", "-m", "add lib")
    sub = outer / "lib"
    assert (sub / ".git").is_file()
    gitdir = outer / ".git" / "modules" / "lib"
    git(sub, "config", "user.name", "t")
    git(sub, "config", "user.email", "t@x")
    return sub, gitdir, gitdir


@pytest.mark.parametrize("kind", ["worktree", "submodule"])
def test_git_in_a_branch_never_moves_the_real_repository(
    kind: str, backend: str, request: pytest.FixtureRequest
) -> None:
    root, gitdir, common = request.getfixturevalue(kind)
    before = fingerprint(gitdir, common)
    ws = Workspace(root, backend=backend)
    b = ws.branch("b", on_success=None)
    result = run_command(WORK, b.path)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "in branch"
    assert fingerprint(gitdir, common) == before  # not the index, not HEAD, not a ref
    assert b.changes().all_paths == ["README.txt"]
    assert (root / ".git").is_file()  # the user's gitfile is still theirs
    b.commit()
    assert (root / ".git").is_file()
    assert (root / "README.txt").read_text() == "changed\n"
    # HEAD and index as they were; the one new ref keeps the commit the branch made
    after = fingerprint(gitdir, common)
    assert after[:-1] == before[:-1]
    kept = git(root, "for-each-ref", "refs/heads/forkdeck/b")
    assert kept and set(after[-1].splitlines()) == set((before[-1] + kept).splitlines())
    assert git(root, "log", "-1", "--format=%s", "forkdeck/b").strip() == "in branch"
    assert porcelain(root) == " M README.txt\n"


@pytest.mark.parametrize("kind", ["worktree", "submodule"])
async def test_fork_merge_keeps_the_branch_commits_and_commits_the_landing(
    kind: str, request: pytest.FixtureRequest
) -> None:
    root, _gitdir, _common = request.getfixturevalue(kind)
    before = head(root)
    ws = Workspace(root)
    coord = await fork_with(
        ws,
        {
            "a": [call("run_command", command=WORK)],
            "b": [call("write_file", path="x", content="x")],
        },
        runner=SandboxCommandRunner(),
    )
    result = await coord.merge_or_select("pick:a", git=GitLanding(commit=True))
    assert result.git_ref == f"refs/heads/forkdeck/{result.fork_id}/a"
    assert result.git_ref is not None
    assert git(root, "log", "-1", "--format=%s", result.git_ref).strip() == "in branch"
    assert result.git_commit == head(root) and git(root, "rev-parse", "HEAD^").strip() == before
    assert git(root, "diff", "--name-only", before, "HEAD").split() == ["README.txt"]
    assert porcelain(root) == ""
    git(root, "fsck", "--strict", "--no-progress")
