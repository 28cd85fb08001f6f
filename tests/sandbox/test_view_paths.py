"""Branch views reached through /proc/<pid>/root: every legal path name must parse."""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core.sandbox import run_command
from branching_core.sandbox.namespaces import parse_view_path
from branching_core.workspace import Workspace

# Every test runs against the native executor and the Python path (conftest.executor).
pytestmark = pytest.mark.usefixtures("executor")


def test_view_path_with_a_newline_parses() -> None:
    # A newline is a legal byte in a path; `.` without DOTALL stopped at it, so the view
    # was taken for a host path and the sandbox wrote somewhere the branch never sees.
    assert parse_view_path("/proc/12/root/st\nore/view") == (12, "/st\nore/view")
    assert parse_view_path("/proc/12/root/view\n") == (12, "/view\n")
    assert parse_view_path("/proc/12/root") == (12, "/")
    assert parse_view_path("/home/x\n/proc/12/root/y") == (None, "/home/x\n/proc/12/root/y")


def test_sandboxed_write_lands_when_the_store_path_has_a_newline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKDECK_STORE", str(tmp_path / "sto\nres"))
    project = tmp_path / "project"
    project.mkdir()
    ws = Workspace(project, backend="overlay")
    with ws.branch("nl", on_success=None) as branch:
        result = run_command("echo hi > made.txt", workspace=branch.path, timeout=60)
        assert result.exit_code == 0, result.stderr
        assert (Path(branch.path) / "made.txt").read_text() == "hi\n"
        branch.abort()
    assert not (project / "made.txt").exists()
