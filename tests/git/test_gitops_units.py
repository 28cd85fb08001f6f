"""The small pure parts of ``branching_core.gitops``: commit subjects and trailers, ref
names, and the repository state line and refusals (on real repositories)."""

from __future__ import annotations

from pathlib import Path

from branching_core.gitops import (
    check_branch_name,
    landing_message,
    precheck,
    ref_name,
    repo_state,
    summary_line,
)

from .repo import git, head, make_repo


def test_summary_line_and_trailers() -> None:
    assert summary_line("  use a cache.\nthen test it") == "Use a cache"
    long = summary_line("x" * 100)
    assert len(long) == 72 and long.endswith("…")
    assert summary_line("", "fallback") == "fallback"
    message = landing_message(
        None, steer="fix the parser", trailers={"Fork": "f1", "Model": None, "Tests": "ok"}
    )
    assert message == "Fix the parser\n\nForkdeck-Fork: f1\nForkdeck-Tests: ok\n"
    assert landing_message("Mine", trailers={}) == "Mine\n"


def test_ref_names_are_valid_refs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    for parts in [("f1", "fast"), ("f 1", "a/b..c"), ("..", "x.lock"), ("-x", "é")]:
        ref = ref_name(*parts)
        assert ref.startswith("refs/heads/forkdeck/")
        git(repo, "check-ref-format", ref)


def test_state_line_and_refusals(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    (repo / "a.txt").write_text("changed\n")
    (repo / "new.txt").write_text("n\n")
    state = repo_state(repo)
    assert state is not None and state.branch == "main" and state.head == head(repo)
    assert state.dirty == ["a.txt", "new.txt"]
    assert state.line(["a.txt"]) == f"git: on main at {head(repo)[:8]}, 1 other dirty file"
    assert precheck(repo) is None and precheck(repo, new_branch="topic") is None
    assert check_branch_name(repo, "main") == "a branch named 'main' already exists"
    git(repo, "checkout", "-q", "--detach")
    assert "HEAD is detached" in (precheck(repo) or "")
    assert precheck(repo, new_branch="topic") is None
    (repo / ".git" / "MERGE_HEAD").write_text(head(repo) + "\n")
    assert "in the middle of a merge" in (precheck(repo, new_branch="topic") or "")
    assert repo_state(tmp_path) is None  # not a repository
    assert "not in a git repository" in (precheck(tmp_path) or "")
