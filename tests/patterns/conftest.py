"""Real workspaces on the overlay and copy backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.errors import BackendUnavailableError
from branching_core.workspace import Workspace


@pytest.fixture(params=["overlay", "copy"])
def ws(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "base.txt").write_text("base\n")
    try:
        workspace = Workspace(root, backend=request.param)
    except BackendUnavailableError as exc:
        pytest.skip(f"{request.param} backend unavailable: {exc}")
    yield workspace
    assert workspace.open_branches() == []
    workspace.close()


@pytest.fixture
def copy_ws(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "base.txt").write_text("base\n")
    workspace = Workspace(root, backend="copy")
    yield workspace
    assert workspace.open_branches() == []
    workspace.close()


def files(ws: Workspace) -> set[str]:
    return {p.name for p in ws.path.iterdir() if not p.name.startswith(".")}
