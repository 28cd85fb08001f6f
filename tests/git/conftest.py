from __future__ import annotations

import shutil

import pytest


@pytest.fixture(autouse=True)
def _needs_git() -> None:
    if shutil.which("git") is None:  # CI installs git (.ci/run); say so when it is missing
        pytest.fail("git is not installed: the git tests need real git")
