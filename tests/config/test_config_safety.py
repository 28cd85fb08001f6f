"""Hostile and unlucky config files: links leading out of the workspace, read-only files,
runaway nesting, broken files whose other values must survive a change, and keeping
``.pydantic-deep/`` out of ``git status``.

Real files in temporary directories; a real ``git`` where the test needs one.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
import tomllib
from pathlib import Path

import pytest

from branching_core.config import SettingsStore, config_path, load_settings
from branching_core.errors import ConfigError
from branching_core.state_dir import GITIGNORE_TEXT

HOME_RC = "export PATH=$HOME/bin:$PATH  # the user's own file\n"


def tree(directory: Path) -> dict[str, bytes | str]:
    """Every entry under ``directory`` (links as their target): proves nothing changed."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            rel = str(full.relative_to(directory))
            if full.is_symlink():
                out[rel] = "-> " + os.readlink(full)
            elif full.is_file():
                out[rel] = full.read_bytes()
            else:
                out[rel] = "<dir>"
    return out


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Stands in for the user's home directory, outside the workspace."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text(HOME_RC)
    return home


def _file_link(ws: Path, home: Path) -> None:
    (ws / ".pydantic-deep").mkdir(parents=True)
    (ws / ".pydantic-deep" / "config.toml").symlink_to(home / ".bashrc")


def _dir_link(ws: Path, home: Path) -> None:
    (home / "state").mkdir()
    (home / "state" / "config.toml").write_text("[fork]\nbranches = 5\n")
    ws.mkdir(parents=True)
    (ws / ".pydantic-deep").symlink_to(home / "state")


def _relative_file_link(ws: Path, home: Path) -> None:
    (ws / ".pydantic-deep").mkdir(parents=True)
    target = os.path.relpath(home / ".bashrc", ws / ".pydantic-deep")
    (ws / ".pydantic-deep" / "config.toml").symlink_to(target)


# -- 12.9: never read, write or back up through a link that leaves the workspace -----------


@pytest.mark.parametrize("shape", [_file_link, _dir_link, _relative_file_link])
def test_a_link_leaving_the_workspace_is_never_written_through(
    tmp_path: Path, home: Path, shape: object
) -> None:
    ws = tmp_path / "ws"
    shape(ws, home)  # type: ignore[operator]
    before_home, before_ws = tree(home), tree(ws)

    store = SettingsStore(ws)
    for change in (
        lambda: store.set_branch_count(3),
        lambda: store.set("review.test_command", "pytest"),
        lambda: store.clear_budgets(),
    ):
        with pytest.raises(ConfigError) as info:
            change()
        message = str(info.value)
        assert "\n" not in message and "outside the workspace" in message
    assert tree(home) == before_home  # no write through the link, no backup beside its target
    assert tree(ws) == before_ws  # no backup of the user's file copied into the repository


@pytest.mark.parametrize("shape", [_file_link, _dir_link])
def test_a_link_leaving_the_workspace_is_not_read(
    tmp_path: Path, home: Path, shape: object
) -> None:
    ws = tmp_path / "ws"
    shape(ws, home)  # type: ignore[operator]
    loaded = load_settings(ws)
    assert loaded.settings.fork_branch_count == 2  # the default, not the linked file's 5
    assert len(loaded.problems) == 1
    assert "outside the workspace" in loaded.problems[0].message
    assert "using defaults" in loaded.problems[0].message


def test_config_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = config_path(tmp_path)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(load_settings(tmp_path)), daemon=True)
    thread.start()
    thread.join(10)
    assert outcome, "load_settings blocked on a FIFO"
    assert "not a regular file" in outcome[0].problems[0].message  # type: ignore[attr-defined]


# -- 12.20: a read-only file is the user's; runaway nesting is a config error ---------------


def test_read_only_config_is_not_rewritten(tmp_path: Path) -> None:
    path = config_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("[fork]\nbranches = 4\n")
    path.chmod(0o444)
    store = SettingsStore(tmp_path)
    with pytest.raises(ConfigError) as info:
        store.set_branch_count(3)
    assert "read-only (mode 0444)" in str(info.value) and "\n" not in str(info.value)
    assert path.read_text() == "[fork]\nbranches = 4\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.toml"]
    assert store.settings.fork_branch_count == 4


@pytest.mark.parametrize("levels", [40, 300, 5000])
def test_deeply_nested_toml_is_a_problem_not_a_crash(tmp_path: Path, levels: int) -> None:
    path = config_path(tmp_path)
    path.parent.mkdir(parents=True)
    text = "[fork]\nbranches = 4\n[review]\na = " + "[" * levels + "]" * levels + "\n"
    path.write_text(text)
    loaded = load_settings(tmp_path)  # used to raise RecursionError at 5000 levels
    assert loaded.problems and all("\n" not in p.message for p in loaded.problems)
    assert any("nested" in p.message for p in loaded.problems)

    store = SettingsStore(tmp_path)
    result = store.set("review.test_command", "pytest")  # used to raise RecursionError (300)
    assert result.backup is not None and result.backup.read_text() == text
    doc = tomllib.loads(path.read_text())
    assert doc["fork"] == {"branches": 4}  # carried over
    assert doc["review"] == {"test_command": "pytest"}  # the runaway value is gone


# -- 13.22: changing a setting in a broken file keeps every value that still parses ---------


def test_a_change_to_a_broken_file_carries_the_valid_values_over(tmp_path: Path) -> None:
    broken = (
        "[fork]\n"
        "branches = 4\n"
        "per_branch_budget_usd = = 0.5\n"  # the typo
        "max_depth = 3\n"
        "[model]\n"
        'default = "anthropic:claude-sonnet-4-5"\n'
        "[review\n"  # a broken header: its body cannot be placed
        'test_command = "make check"\n'
        "[workspace]\n"
        'backend = "copy"\n'
    )
    path = config_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(broken)
    store = SettingsStore(tmp_path)
    assert store.settings.fork_branch_count == 2  # loading a broken file still means defaults

    result = store.set_budget("aggregate", "1.5")
    assert result.backup is not None and result.backup.read_text() == broken
    assert tomllib.loads(path.read_text()) == {
        "fork": {"branches": 4, "max_depth": 3, "aggregate_budget_usd": 1.5},
        "model": {"default": "anthropic:claude-sonnet-4-5"},
        "workspace": {"backend": "copy"},
    }
    assert store.problems == []
    assert store.settings.max_depth == 3 and store.settings.backend == "copy"


def test_unclosed_string_and_bad_utf8_lines_are_left_out(tmp_path: Path) -> None:
    path = config_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(
        b'[fork]\nbranches = 3\n[review]\ntest_command = "tox\xff"\n'
        b'difftool = """meld\nmerge_strategy = "vote"\n'
    )
    SettingsStore(tmp_path).set("fork.max_depth", 4)
    doc = tomllib.loads(path.read_text())
    assert doc == {"fork": {"branches": 3, "max_depth": 4}, "review": {}}


# -- 13.26: .pydantic-deep/ stays out of git status, config.toml stays committable ---------


def test_state_dir_gets_a_gitignore(tmp_path: Path) -> None:
    SettingsStore(tmp_path).set_branch_count(3)
    assert (tmp_path / ".pydantic-deep" / ".gitignore").read_text() == GITIGNORE_TEXT


def test_a_users_own_gitignore_is_kept(tmp_path: Path) -> None:
    state = tmp_path / ".pydantic-deep"
    state.mkdir()
    (state / ".gitignore").write_text("forks/\n")
    SettingsStore(tmp_path).set_branch_count(3)
    assert (state / ".gitignore").read_text() == "forks/\n"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return proc.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_status_shows_only_config_toml(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "README").write_text("x\n")
    _git(tmp_path, "add", "README")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")

    store = SettingsStore(tmp_path)
    store.set_branch_count(3)
    state = tmp_path / ".pydantic-deep"
    # what forks, backups and mirrors leave there
    (state / "forks" / "f1" / "branches" / "a").mkdir(parents=True)
    (state / "forks" / "f1" / "manifest.json").write_text("{}")
    (state / "forks" / "f1" / "judge.log").write_text("log")
    (state / "config.toml.broken-20260101T000000Z").write_text("[[[")
    (state / "config.toml.bak-20260101T000000Z").write_text("# old")
    (state / "commit").mkdir()

    status = _git(tmp_path, "status", "--porcelain", "--untracked-files=all")
    assert status.splitlines() == ["?? .pydantic-deep/config.toml"]
    _git(tmp_path, "add", ".pydantic-deep")
    assert _git(tmp_path, "diff", "--cached", "--name-only").split() == [
        ".pydantic-deep/config.toml"
    ]


def test_the_fork_store_writes_the_gitignore_too(tmp_path: Path) -> None:
    from branching_core.fork.store import ForkStore

    ForkStore(tmp_path).write_manifest({"fork_id": "f1"})
    assert (tmp_path / ".pydantic-deep" / ".gitignore").read_text() == GITIGNORE_TEXT
