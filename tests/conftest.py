"""Suite-wide fixtures: every test gets its own branch store beside its tmp dir."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_branch_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep branch stores out of the user's cache and on the tmp filesystem."""
    store = tmp_path / "_stores"
    monkeypatch.setenv("FORKDECK_STORE", str(store))
    return store
