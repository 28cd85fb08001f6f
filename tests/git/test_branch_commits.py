"""Issue 25.2: commits made inside a branch are kept as ``forkdeck/<fork>/<label>`` in the
parent (objects copied, nothing else touched); fast-forward only when asked and HEAD has
not moved. Real forks, real sandboxed git."""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core.agent import SandboxCommandRunner
from branching_core.fork.git_landing import GitLanding
from branching_core.workspace import Workspace
from tests.review.forks import call, fork_with

from .repo import git, head, make_repo, porcelain

COMMIT_TWICE = (
    "echo one > one.txt && git add one.txt && git commit -q -m one && "
    "echo two > two.txt && git add two.txt && git commit -q -m two"
)


@pytest.fixture(params=["auto", "copy"])
def ws(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    root = make_repo(tmp_path / "project")
    git(root, "config", "user.name", "Branch Agent")  # the sandbox reads the repo's config
    return Workspace(root, backend=request.param)


async def committing_fork(ws: Workspace):
    return await fork_with(
        ws,
        {
            "a": [call("run_command", command=COMMIT_TWICE)],
            "b": [call("write_file", path="b", content="b\n")],
        },
        runner=SandboxCommandRunner(),
    )


async def test_branch_commits_land_as_a_forkdeck_ref(ws: Workspace) -> None:
    repo = ws.path
    before, refs_before = head(repo), git(repo, "for-each-ref")
    coord = await committing_fork(ws)
    result = await coord.merge_or_select("pick:a")
    fork_id = result.fork_id
    assert result.git_ref == f"refs/heads/forkdeck/{fork_id}/a"
    log = git(repo, "log", "--format=%s", f"forkdeck/{fork_id}/a").split()
    assert log == ["two", "one", "init"]
    assert "git: 2 commit(s) made in the branch kept as" in " ".join(result.git_notes)
    # nothing else moved: HEAD, the other refs, no FETCH_HEAD
    assert head(repo) == before
    new_refs = git(repo, "for-each-ref").replace(
        git(repo, "for-each-ref", f"refs/heads/forkdeck/{fork_id}/a"), ""
    )
    assert new_refs == refs_before
    assert not (repo / ".git" / "FETCH_HEAD").exists()
    git(repo, "fsck", "--strict", "--no-progress")
    # the branch's files landed as files (uncommitted on main)
    assert sorted(porcelain(repo).splitlines()) == ["?? one.txt", "?? two.txt"]


async def test_fast_forward_when_asked_and_head_has_not_moved(ws: Workspace) -> None:
    repo = ws.path
    coord = await committing_fork(ws)
    result = await coord.merge_or_select("pick:a", git=GitLanding(fast_forward=True))
    assert head(repo) == git(repo, "rev-parse", result.git_ref or "").strip()
    assert git(repo, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert porcelain(repo) == ""  # index and working tree agree with the new HEAD
    assert any("main fast-forwarded" in n for n in result.git_notes)


async def test_no_fast_forward_when_head_moved(ws: Workspace) -> None:
    repo = ws.path
    coord = await committing_fork(ws)
    (repo / "user.txt").write_text("u\n")
    git(repo, "add", "user.txt")
    git(repo, "commit", "-q", "-m", "the user committed meanwhile")
    moved = head(repo)
    result = await coord.merge_or_select("pick:a", git=GitLanding(fast_forward=True))
    assert head(repo) == moved and result.git_ref is not None
    assert "git: HEAD moved since the fork: no fast-forward" in result.git_notes
    git(repo, "fsck", "--strict", "--no-progress")


def test_a_plain_workspace_branch_keeps_its_commits_too(tmp_path: Path) -> None:
    from branching_core.sandbox import run_command

    repo = make_repo(tmp_path / "project")
    ws = Workspace(repo)
    outer = ws.branch("outer", on_success=None)
    inner = outer.branch("inner", on_success=None)
    result = run_command(COMMIT_TWICE, inner.path)
    assert result.exit_code == 0, result.stderr
    inner.commit()  # into outer's repository view, as forkdeck/outer/inner
    assert inner.git_note is not None and "forkdeck/outer/inner" in inner.git_note
    outer.commit()  # outer made no commit itself; its received ref travels on
    assert git(repo, "log", "--format=%s", "forkdeck/outer/inner").split() == [
        "two", "one", "init"
    ]
    assert sorted(porcelain(repo).splitlines()) == ["?? one.txt", "?? two.txt"]
    git(repo, "fsck", "--strict", "--no-progress")


def test_nested_and_outer_commits_both_kept(tmp_path: Path) -> None:
    from branching_core.sandbox import run_command

    repo = make_repo(tmp_path / "project")
    ws = Workspace(repo)
    outer = ws.branch("outer", on_success=None)
    inner = outer.branch("inner", on_success=None)
    assert run_command(COMMIT_TWICE, inner.path).exit_code == 0
    inner.commit()
    three = "echo 3 > three.txt && git add three.txt && git commit -q -m three"
    assert run_command(three, outer.path).exit_code == 0
    outer.commit()
    # "forkdeck/outer" and "forkdeck/outer/inner" cannot both exist: the inner one is renamed
    assert git(repo, "log", "-1", "--format=%s", "forkdeck/outer").strip() == "three"
    assert git(repo, "log", "-1", "--format=%s", "forkdeck/outer-inner").strip() == "two"
    assert outer.git_note is not None and "forkdeck/outer-inner" in outer.git_note
    git(repo, "fsck", "--strict", "--no-progress")
