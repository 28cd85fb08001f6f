"""Bad input raises a specific BranchingError with a one-line message and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core import (
    BackendUnavailableError,
    BranchingError,
    InvalidBranchNameError,
    Workspace,
    WorkspaceError,
    WorkspaceNotADirectoryError,
    WorkspaceNotFoundError,
)
from tests.workspace.treeutil import snapshot


def _one_line(exc: BaseException) -> str:
    message = str(exc)
    assert message and "\n" not in message
    return message


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceNotFoundError) as info:
        Workspace(tmp_path / "nope")
    assert "does not exist" in _one_line(info.value)
    assert not (tmp_path / "nope").exists()


def test_path_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x")
    with pytest.raises(WorkspaceNotADirectoryError) as info:
        Workspace(target)
    assert "not a directory" in _one_line(info.value)
    assert target.read_text() == "x"


@pytest.mark.parametrize("name", ["a/b", "..", "up..dir", "nul\x00byte", "", "."])
def test_bad_branch_names(ws_dir: Path, backend: str, name: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    before = snapshot(ws_dir)
    with pytest.raises(InvalidBranchNameError) as info:
        ws.branch(name)
    _one_line(info.value)
    assert snapshot(ws_dir) == before and ws.open_branches() == []


def test_duplicate_open_sibling_name(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    first = ws.branch("same")
    with pytest.raises(InvalidBranchNameError, match="already open"):
        ws.branch("same")
    first.abort()
    ws.branch("same").abort()  # reusable once closed


def test_unknown_backend(ws_dir: Path) -> None:
    with pytest.raises(WorkspaceError, match="unknown backend 'zfs'"):
        Workspace(ws_dir, backend="zfs")


def test_forced_backend_that_cannot_work_names_its_reason(tmp_path: Path) -> None:
    ws_dir = tmp_path / "ws"
    ws_dir.mkdir()
    with pytest.raises(BackendUnavailableError) as info:
        Workspace(ws_dir, backend="reflink")  # tmp is ext4 here: no FICLONE
    message = _one_line(info.value)
    assert "reflink" in message and "reflink" in info.value.reasons


def test_no_backend_works_names_each_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws_dir = tmp_path / "ws"
    ws_dir.mkdir()
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store should go")
    monkeypatch.setenv("FORKDECK_STORE", str(blocker))
    with pytest.raises(BackendUnavailableError) as info:
        Workspace(ws_dir)
    message = _one_line(info.value)
    for name in ("overlay", "reflink", "copy"):
        assert name in message and name in info.value.reasons
    assert isinstance(info.value, BranchingError)
    assert blocker.read_text() == "a file where the store should go"
