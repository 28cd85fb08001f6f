"""Shared fixtures: a real temporary workspace next to an 'outside' directory to escape into."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from branching_core.agent import LocalCommandRunner, WorkspaceToolset, create_workspace_toolset


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its content or link target: to prove nothing changed."""
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            rel = str(full.relative_to(root))
            if full.is_symlink():
                state[rel] = "-> " + os.readlink(full)
            elif full.is_dir():
                state[rel] = "<dir>"
            elif not full.is_file():
                state[rel] = f"<special {oct(full.lstat().st_mode)}>"  # a FIFO: never read it
            else:
                state[rel] = full.read_bytes().decode("latin-1")
    return state


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("top secret\n")
    return out


@pytest.fixture
def ws(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    return 42\n")
    (root / "src" / "util.py").write_text("import os\n\nVALUE = 1\n")
    return root


@pytest.fixture
def tools(ws: Path) -> WorkspaceToolset:
    return create_workspace_toolset(ws, command_runner=LocalCommandRunner(), command_timeout=10)
