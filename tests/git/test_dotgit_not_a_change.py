"""Issue 25.1: a branch sees the repository (git status/add/commit work inside it, in its
sandbox), but ``.git`` is never a workspace change: not in ``changes()``, the diff report,
the mirror, a combine or a landing; the parent's index, HEAD and refs are never
overwritten by a merge. Real git, real sandboxes, both the automatic backend (overlay
here) and plain copies."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from branching_core.agent import SandboxCommandRunner
from branching_core.fork.combine import CombineError
from branching_core.fork.mirror.materializer import ForkMaterializer
from branching_core.sandbox import run_command
from branching_core.workspace import Workspace
from branching_core.workspace.paths import is_internal_path
from tests.review.forks import call, fork_with

from .repo import git, head, make_repo, porcelain

GIT_WORK = (
    "git status --short >/dev/null && sed -i 's/VALUE = 1/VALUE = 2/' src/app.py && "
    "git add src/app.py && git commit -q -m 'in branch' && git status --short"
)


@pytest.fixture(params=["auto", "copy"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "project", {"src/app.py": "VALUE = 1\n"})


def no_git(paths: list[str]) -> bool:
    return not any(".git" in p.split("/") for p in paths)


def test_is_internal_path() -> None:
    assert is_internal_path(".git") and is_internal_path(".git/index")
    assert is_internal_path("vendor/lib/.git/HEAD") and is_internal_path(".pydantic-deep/x")
    assert not is_internal_path(".gitignore") and not is_internal_path("src/.github/x.yml")
    assert not is_internal_path("a/.pydantic-deep")  # the state dir is top-level only


def test_git_works_in_the_branch_and_is_never_a_change(repo: Path, backend: str) -> None:
    ws = Workspace(repo, backend=backend)
    index_before = (repo / ".git" / "index").read_bytes()
    refs_before = git(repo, "for-each-ref")
    b = ws.branch("b", on_success=None)
    result = run_command(GIT_WORK, b.path)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""  # the branch's own git sees a clean tree after its commit
    changes = b.changes()
    assert changes.all_paths == ["src/app.py"]
    b.commit()
    assert (repo / "src" / "app.py").read_text() == "VALUE = 2\n"
    # the user's repository: same index bytes, same refs; the landed file shows modified
    assert (repo / ".git" / "index").read_bytes() == index_before
    # the only new ref keeps the branch's commit (forkdeck/<branch name>)
    kept = git(repo, "for-each-ref", "refs/heads/forkdeck/")
    assert kept.endswith("\trefs/heads/forkdeck/b\n")
    assert set(git(repo, "for-each-ref").splitlines()) == set((refs_before + kept).splitlines())
    assert porcelain(repo) == " M src/app.py\n"


def test_index_refresh_only_branch_leaves_the_parent_index_byte_identical(
    repo: Path, backend: str
) -> None:
    ws = Workspace(repo, backend=backend)
    # make the parent's index stale (a touched file) so the branch's git status rewrites it
    time.sleep(0.01)
    (repo / "README.txt").touch()
    index_before = (repo / ".git" / "index").read_bytes()
    b = ws.branch("b", on_success=None)
    result = run_command("git status --short && sed -i 's/hello/bye/' README.txt", b.path)
    assert result.exit_code == 0, result.stderr
    assert b.changes().all_paths == ["README.txt"]
    b.commit()
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert head(repo) == git(repo, "rev-parse", "main").strip()


def test_a_repository_made_inside_the_branch_lands_without_its_git(
    repo: Path, backend: str
) -> None:
    ws = Workspace(repo, backend=backend)
    b = ws.branch("b", on_success=None)
    script = (
        "mkdir -p vendor/other && cd vendor/other && git init -q && echo 'X = 1' > lib.py && "
        "git add . && git -c user.name=x -c user.email=y@z commit -q -m x"
    )
    result = run_command(script, b.path)
    assert result.exit_code == 0, result.stderr
    changes = b.changes()
    assert no_git(changes.all_paths) and "vendor/other/lib.py" in changes.all_paths
    b.commit()
    assert (repo / "vendor" / "other" / "lib.py").read_text() == "X = 1\n"
    assert not (repo / "vendor" / "other" / ".git").exists()


async def test_fork_diff_report_combine_mirror_and_merge_hold_no_git_path(
    repo: Path, backend: str
) -> None:
    ws = Workspace(repo, backend=backend)
    index_before = (repo / ".git" / "index").read_bytes()
    coord = await fork_with(
        ws,
        {
            "b": [call("run_command", command=GIT_WORK)],
            "c": [call("run_command", command="git status && git add -A && echo c > c.txt")],
        },
        runner=SandboxCommandRunner(),
    )
    for rt in coord.branches.values():
        assert rt.state == "done", rt.error
    report = coord.diff_report()
    assert no_git([p.path for p in report.paths])
    assert sorted(p.path for p in report.paths) == ["c.txt", "src/app.py"]
    with pytest.raises(CombineError):
        await coord.merge_or_select("combine", selection={".git/index": "b"})
    mat = ForkMaterializer(repo, "mirror-check")
    for rt in coord.branches.values():
        mat.add_branch(rt.label, rt.ws_branch)
    mat.start()
    try:
        deadline = time.monotonic() + 15
        while mat.touched_paths() != ["c.txt", "src/app.py"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mat.touched_paths() == ["c.txt", "src/app.py"]  # and no .git path
        assert not any(p.name == ".git" for p in mat.fork_dir.rglob(".git"))
    finally:
        mat.close()
    result = await coord.merge_or_select("pick:b")
    assert result.applied_paths == ["src/app.py"] and no_git(result.deleted_paths)
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert result.git_ref is not None and result.git_ref.endswith("/b")
    git(repo, "fsck", "--strict")
