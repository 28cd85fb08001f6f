"""Issue 25.3, headless: the pattern commands' ``--git-commit[=MESSAGE]``,
``--git-branch NAME``, ``--git-ff`` and ``[git] commit_merges`` (the real CLI entry point,
real sandboxes, real git)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from branching_core.cli import main

from .repo import git, head, make_repo, porcelain


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_repo(tmp_path / "project", {"a.txt": "a\n", "notes.txt": "n\n"})
    (root / "notes.txt").write_text("the user's unstaged edit\n")
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    cut = args.index("--") if "--" in args else len(args)
    code = main([*args[:cut], "--json", *args[cut:]])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_speculate_git_commit_lands_one_commit_of_the_winners_paths(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = head(repo)
    code, data = run(capsys, "speculate", "-w", str(repo), "-c",
                     "echo won > a.txt && echo x > b.txt", "--git-commit=Land the winner")
    assert code == 0 and data["committed"]
    assert data["git"]["commit"] == head(repo) and git(repo, "rev-parse", "HEAD^").strip() == before
    assert git(repo, "diff", "--name-only", before, "HEAD").split() == ["a.txt", "b.txt"]
    assert porcelain(repo) == " M notes.txt\n"
    message = git(repo, "log", "-1", "--format=%B")
    assert message.startswith("Land the winner\n\nForkdeck-Fork: speculate-")
    assert "Forkdeck-Tests: speculate winner: committed" in message


def test_commits_made_by_the_winner_kept_and_fast_forwarded(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = head(repo)
    cmd = "echo c > c.txt && git add c.txt && git -c user.name=b -c user.email=b@x commit -qm c"
    code, data = run(capsys, "best-of-n", "-w", str(repo), "-n", "1", "--git-ff", "--", "sh",
                     "-c", cmd)
    assert code == 0, data
    ref = data["git"]["ref"]
    assert ref.startswith("refs/heads/forkdeck/best-of-n-")
    assert head(repo) == git(repo, "rev-parse", ref).strip() != before
    assert porcelain(repo) == " M notes.txt\n"
    git(repo, "fsck", "--strict", "--no-progress")


def test_git_branch_and_config_default(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / ".pydantic-deep").mkdir()
    (repo / ".pydantic-deep" / "config.toml").write_text("[git]\ncommit_merges = true\n")
    code, data = run(capsys, "speculate", "-w", str(repo), "-c", "echo won > a.txt")
    assert code == 0 and data["git"]["commit"] == head(repo)
    code, data = run(capsys, "speculate", "-w", str(repo), "-c", "echo again > a.txt",
                     "--git-branch", "topic/x")
    assert code == 0 and git(repo, "symbolic-ref", "--short", "HEAD").strip() == "topic/x"


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("--git-branch", "main"), "a branch named 'main' already exists"),
        (("--git-branch", "no..dots"), "is not a valid branch name"),
        (("--git-commit", "--git-all-or-nothing"), "HEAD is detached"),
    ],
)
def test_bad_git_options_run_nothing(
    repo: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], why: str
) -> None:
    git(repo, "checkout", "-q", "--detach")
    before = (head(repo), porcelain(repo))
    code = main(["speculate", "-w", str(repo), "-c", "echo won > a.txt", *args])
    err = capsys.readouterr().err
    assert code == 2 and why in err and "nothing was run" in err
    assert (head(repo), porcelain(repo)) == before
    assert (repo / "a.txt").read_text() == "a\n"


def test_not_a_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    code = main(["speculate", "-w", str(plain), "-c", "true", "--git-commit"])
    assert code == 2 and "is not in a git repository" in capsys.readouterr().err
