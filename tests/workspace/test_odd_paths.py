"""Workspace paths with characters that mean something to mount options or protocols.

A ``,`` ``:`` or ``\\`` in the workspace path used to make the overlay probe fail (the
mount options were not escaped), silently falling back to the copy backend; a newline
in the workspace's name reached the branch view's path (through the store key) and
made sandboxed writes vanish.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core import Workspace
from branching_core.sandbox import run_command, sandbox_available
from branching_core.workspace.backends import OverlayBackend
from branching_core.workspace.store import default_store_root

ODD_NAMES = ["a,b", "back\\slash", "co:lon", "all,:\\mix", "new\nline", "sp ace"]


@pytest.fixture
def overlay_ok(tmp_path: Path) -> None:
    probe = tmp_path / "plain"
    probe.mkdir()
    reason = OverlayBackend.probe(probe, tmp_path / "_probe_store")
    if reason:
        pytest.skip(f"overlay unavailable here: {reason}")


@pytest.mark.parametrize("name", ODD_NAMES)
def test_overlay_is_kept_for_odd_workspace_paths(
    tmp_path: Path, name: str, overlay_ok: None
) -> None:
    ws_dir = tmp_path / f"dir{name}" / name
    ws_dir.mkdir(parents=True)
    (ws_dir / "x.txt").write_text("x\n")
    ws = Workspace(ws_dir)
    assert ws.fstype == "overlay", ws.passed_over
    with ws.branch("outer") as outer:
        (outer.path / "y.txt").write_text("y\n")
        with outer.branch("inner") as inner:  # lower = two odd paths
            assert (inner.path / "y.txt").read_text() == "y\n"
            (inner.path / "z.txt").write_text("z\n")
    assert sorted(p.name for p in ws_dir.iterdir()) == ["x.txt", "y.txt", "z.txt"]


def test_store_paths_carry_no_odd_characters(tmp_path: Path) -> None:
    ws_dir = tmp_path / "new\nline,co:lon\\x"
    ws_dir.mkdir()
    store = default_store_root(ws_dir)
    assert store.name.startswith("new_line_co_lon_x-")
    other = tmp_path / "new_line_co_lon_x"
    other.mkdir()
    assert default_store_root(other) != store, "the hash keeps safe names apart"


def test_a_store_made_before_safe_names_keeps_being_used(tmp_path: Path) -> None:
    ws_dir = tmp_path / "a,b"
    ws_dir.mkdir()
    safe = default_store_root(ws_dir)
    legacy = safe.with_name("a,b-" + safe.name.rsplit("-", 1)[1])
    legacy.mkdir(parents=True)
    assert default_store_root(ws_dir) == legacy


@pytest.mark.parametrize("backend", ["overlay", "copy"])
def test_sandboxed_writes_land_in_a_branch_of_a_newline_named_workspace(
    tmp_path: Path, backend: str
) -> None:
    ok, why = sandbox_available()
    if not ok:
        pytest.skip(f"sandbox unavailable here: {why}")
    ws_dir = tmp_path / "new\nline"
    ws_dir.mkdir()
    ws = Workspace(ws_dir, backend=backend)
    with ws.branch("b") as branch:
        result = run_command("echo hi > made.txt", branch.path, timeout=30)
        assert result.exit_code == 0, result.stderr
        assert (branch.path / "made.txt").read_text() == "hi\n"
    assert (ws_dir / "made.txt").read_text() == "hi\n"
