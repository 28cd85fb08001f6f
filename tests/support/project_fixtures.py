"""The small project most fork-level tests start from, as pytest fixtures.

Import the fixtures into a conftest or test module (``from tests.support.project_fixtures
import project, runner, ws``) so every suite forks the same tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core.agent import LocalCommandRunner
from branching_core.workspace import Workspace


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.txt").write_text("hello\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("VALUE = 1\n")
    return root


@pytest.fixture
def ws(project: Path) -> Workspace:
    return Workspace(project)


@pytest.fixture
def runner() -> LocalCommandRunner:
    return LocalCommandRunner()


__all__ = ["project", "runner", "ws"]
