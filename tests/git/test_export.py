"""Issue 25.4: ``forkdeck export FORK LABEL [--patch FILE | --branch NAME]`` on a fork left
open by a session that ended: a patch ``git apply`` takes on a clean clone (binary
included), or a branch holding exactly the winner's change; nothing lands in the working
tree, the index or HEAD. Real git, the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .fork_and_exit import BINARY
from .repo import git, head, make_repo, porcelain

ROOT = Path(__file__).resolve().parents[2]
_STORE: list[str] = []


def forkdeck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "branching_core.cli", *args],
        cwd=cwd, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FORKDECK_STORE": _STORE[-1]},
    )


@pytest.fixture(scope="module")
def left_open(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One fork left open for the whole module (exports never change it)."""
    base = tmp_path_factory.mktemp("export")
    files = {"src/app.py": "VALUE = 1\n", "src/tool.sh": "echo\n"}
    repo = make_repo(base / "project", files)
    # the per-test store (tests/conftest.py) is not set up for a module fixture: one here,
    # used by the fork and every export of this module
    _STORE.append(str(base / "store"))
    proc = subprocess.run(
        [sys.executable, "-m", "tests.git.fork_and_exit", str(repo)],
        cwd=ROOT, capture_output=True, text=True, check=False,
        env={**os.environ, "FORKDECK_STORE": _STORE[-1]},
    )
    assert proc.returncode == 0, proc.stderr
    return repo, proc.stdout.split()[-1]


def untouched(repo: Path, before: tuple[str, str, bytes]) -> bool:
    return (head(repo), porcelain(repo), (repo / ".git" / "index").read_bytes()) == before


def test_export_patch_applies_on_a_clean_clone(left_open: tuple[Path, str], tmp_path: Path) -> None:
    repo, fork_id = left_open
    before = (head(repo), porcelain(repo), (repo / ".git" / "index").read_bytes())
    patch = tmp_path / "fast.patch"
    proc = forkdeck("export", fork_id, "fast", "--patch", str(patch), "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["patch"] == str(patch)
    assert untouched(repo, before)
    assert (repo / "src" / "app.py").read_text() == "VALUE = 1\n"
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "apply", "--check", str(patch))
    git(clone, "apply", str(patch))
    assert (clone / "src" / "app.py").read_text() == "VALUE = 2\n"
    assert (clone / "logo.bin").read_bytes() == BINARY
    assert os.readlink(clone / "link") == "src/app.py"
    assert os.access(clone / "src" / "tool.sh", os.X_OK)
    assert not (clone / "README.txt").exists()


def test_export_to_stdout(left_open: tuple[Path, str]) -> None:
    repo, fork_id = left_open
    proc = forkdeck("export", fork_id, "slow", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "+VALUE = 3" in proc.stdout and "logo.bin" not in proc.stdout


def test_export_branch_holds_exactly_the_change(left_open: tuple[Path, str]) -> None:
    repo, fork_id = left_open
    before = (head(repo), porcelain(repo), (repo / ".git" / "index").read_bytes())
    proc = forkdeck("export", fork_id, "fast", "--branch", "pr/fast", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert untouched(repo, before)
    changed = sorted(git(repo, "diff", "--name-only", "main", "pr/fast").split())
    assert changed == ["README.txt", "link", "logo.bin", "src/app.py", "src/tool.sh"]
    assert git(repo, "rev-parse", "pr/fast^").strip() == head(repo)
    message = git(repo, "log", "-1", "--format=%B", "pr/fast")
    assert message.startswith("Do fast\n") and f"Forkdeck-Fork: {fork_id}" in message
    # the fork is still open: exporting again (or merging later) works
    again = forkdeck("export", fork_id, "fast", "--branch", "pr/fast-2", cwd=repo)
    assert again.returncode == 0, again.stderr


def test_export_bad_input_is_one_line_and_changes_nothing(left_open: tuple[Path, str]) -> None:
    repo, fork_id = left_open
    before = (head(repo), porcelain(repo), (repo / ".git" / "index").read_bytes())
    for args, why in [
        ((fork_id, "nope"), "has no branch 'nope'"),
        (("f-missing", "fast"), "no fork 'f-missing'"),
        ((fork_id, "fast", "--branch", "main"), "already exists"),
        ((fork_id, "fast", "--branch", "bad..name"), "not a valid branch name"),
    ]:
        proc = forkdeck("export", *args, cwd=repo)
        assert proc.returncode == 2 and why in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert untouched(repo, before)
