"""The safe resolver: every way out of the root is refused, every way within it works."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from branching_core.agent.paths import UnsafePathError, relative_to_root, resolve_in_root
from branching_core.errors import BranchingError


def test_plain_and_dot_paths(ws: Path) -> None:
    assert resolve_in_root(ws, "src/app.py") == ws / "src" / "app.py"
    assert resolve_in_root(ws, "./src//app.py") == ws / "src" / "app.py"
    assert resolve_in_root(ws, "") == ws
    assert resolve_in_root(ws, ".") == ws
    assert resolve_in_root(ws, "src/../hello.txt") == ws / "hello.txt"


def test_missing_components_are_allowed_inside(ws: Path) -> None:
    assert resolve_in_root(ws, "new/dir/file.txt") == ws / "new" / "dir" / "file.txt"
    assert resolve_in_root(ws, "new/../x") == ws / "x"


@pytest.mark.parametrize(
    "path", ["../x", "..", "src/../../x", "a/../../ws/hello.txt", "/etc/passwd", "/"]
)
def test_escapes_and_absolute_paths_are_refused(ws: Path, path: str) -> None:
    with pytest.raises(UnsafePathError):
        resolve_in_root(ws, path)


def test_refusal_is_a_branching_error(ws: Path) -> None:
    with pytest.raises(BranchingError):
        resolve_in_root(ws, "../x")


def test_symlink_pointing_outside_is_refused(ws: Path, outside: Path) -> None:
    (ws / "out").symlink_to(outside)
    (ws / "abs").symlink_to("/etc")
    (ws / "rel").symlink_to("../outside/secret.txt")
    for path in ("out", "out/secret.txt", "abs/passwd", "rel", "src/../out/x"):
        with pytest.raises(UnsafePathError, match=r"outside|escapes"):
            resolve_in_root(ws, path)


def test_symlink_chain_leading_outside_is_refused(ws: Path, outside: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("src/c")
    (ws / "src" / "c").symlink_to("../../outside")
    with pytest.raises(UnsafePathError):
        resolve_in_root(ws, "a/secret.txt")


def test_symlinks_within_the_root_are_followed(ws: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("src")
    (ws / "src" / "up").symlink_to("..")
    (ws / "inside_abs").symlink_to(ws / "src")  # absolute, but lands inside the root
    assert resolve_in_root(ws, "a/app.py") == ws / "src" / "app.py"
    assert resolve_in_root(ws, "src/up/hello.txt") == ws / "hello.txt"
    assert resolve_in_root(ws, "inside_abs/app.py") == ws / "src" / "app.py"


def test_final_symlink_can_be_kept(ws: Path, outside: Path) -> None:
    (ws / "out").symlink_to(outside)
    assert resolve_in_root(ws, "out", follow_final=False) == ws / "out"
    with pytest.raises(UnsafePathError):
        resolve_in_root(ws, "out/secret.txt", follow_final=False)


def test_symlink_loop_is_refused(ws: Path) -> None:
    (ws / "loop1").symlink_to("loop2")
    (ws / "loop2").symlink_to("loop1")
    with pytest.raises(UnsafePathError, match="too many levels"):
        resolve_in_root(ws, "loop1/x")


def test_hidden_project_state_is_refused(ws: Path) -> None:
    (ws / ".pydantic-deep").mkdir()
    (ws / "state").symlink_to(".pydantic-deep")
    for path in (".pydantic-deep/forks", "src/../.pydantic-deep", "state/x"):
        with pytest.raises(UnsafePathError, match="project state"):
            resolve_in_root(ws, path)


def test_nul_byte_is_refused(ws: Path) -> None:
    with pytest.raises(UnsafePathError):
        resolve_in_root(ws, "a\x00b")


def test_proc_root_view_is_a_plain_boundary(ws: Path) -> None:
    """A /proc/<pid>/root/... root is used as given: never resolved through the magic link."""
    view = Path(f"/proc/{os.getpid()}/root{ws}")
    assert resolve_in_root(view, "src/app.py") == view / "src" / "app.py"
    assert resolve_in_root(view, "src/app.py").read_text().startswith("def main")
    (ws / "abs").symlink_to(ws / "src")  # absolute target names the real path, not the view
    with pytest.raises(UnsafePathError):
        resolve_in_root(view, "abs/app.py")
    with pytest.raises(UnsafePathError):
        resolve_in_root(view, "../x")


def test_relative_to_root(ws: Path) -> None:
    assert relative_to_root(ws, ws / "src" / "app.py") == "src/app.py"
    assert relative_to_root(ws, ws) == "."
