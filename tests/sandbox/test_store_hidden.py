"""A sandboxed branch cannot read its siblings' (or other workspaces') uncommitted
files through the branch store (issue 12, item 13).

The suite's stores live under /tmp, which the sandbox hides anyway, so these tests
put workspaces and stores under /var/tmp, where they would otherwise be visible.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.errors import BackendUnavailableError
from branching_core.sandbox import parse_view_path, run_command
from branching_core.workspace import Workspace

# Every test runs against the native executor and the Python path (conftest.executor).
pytestmark = pytest.mark.usefixtures("executor")


@pytest.fixture
def outside_tmp(sandbox_ok: None) -> Iterator[Path]:
    base = Path(f"/var/tmp/forkdeck-store-test-{secrets.token_hex(4)}")
    base.mkdir()
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _probe(other_branch_dir: Path, store_base: Path) -> str:
    return (f"cat {other_branch_dir}/*/secret.txt; ls -AR {store_base};"
            " echo own > own.txt; cat own.txt")


@pytest.mark.parametrize("backend", ["copy", "overlay"])
@pytest.mark.parametrize("where", ["env", "cache", "beside", "explicit"])
def test_sibling_branches_are_hidden(outside_tmp: Path, backend: str, where: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    project = outside_tmp / "project"
    project.mkdir()
    (project / "file.txt").write_text("base\n")
    store: Path | None = None
    if where == "env":
        base = outside_tmp / "env-stores"
        monkeypatch.setenv("FORKDECK_STORE", str(base))
    elif where == "cache":
        monkeypatch.delenv("FORKDECK_STORE")
        monkeypatch.setenv("XDG_CACHE_HOME", str(outside_tmp / "cache"))
        base = outside_tmp / "cache" / "forkdeck" / "stores"
    elif where == "beside":
        base = outside_tmp / ".forkdeck-stores"
        store = base / "project-key"
    else:
        base = outside_tmp / "mystore"
        store = base
    try:
        ws = Workspace(project, backend=backend, store=store)
    except BackendUnavailableError as exc:
        pytest.skip(f"{backend} backend unavailable here: {exc}")
    with ws.branch("a", on_success=None) as a, ws.branch("b", on_success=None) as b:
        (a.path / "secret.txt").write_text("uncommitted work of a\n")
        a_dir = Path(parse_view_path(a.path)[1]).parent  # the store's directory for a
        assert base in a_dir.parents
        ran = run_command(_probe(a_dir, base), b.path)
        assert "uncommitted work of a" not in ran.stdout, ran.stdout
        assert "No such file" in ran.stderr
        assert ran.stdout.endswith("own\n"), (ran.stdout, ran.stderr)
        assert a.node_id not in ran.stdout, f"the store lists sibling branches: {ran.stdout}"
        assert (b.path / "own.txt").read_text() == "own\n"
