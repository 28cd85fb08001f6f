"""Siblings that each add a new file to the same existing directory never conflict: the
first one's landing changes that directory, but the second one's file was new, not something
a third party deleted (on overlay, where any file a branch writes may be new or a rewrite,
the parent's record of its own landings tells them apart: ``workspace.landed``)."""

from __future__ import annotations

from pathlib import Path

from branching_core.workspace import Workspace
from branching_core.workspace.apply import changed_since
from branching_core.workspace.land import branch_files, land_files


def test_sibling_new_files_in_one_directory_land_path_by_path(ws_dir: Path, backend: str) -> None:
    (ws_dir / "reports").mkdir()
    (ws_dir / "reports" / "index.md").write_text("index\n")
    ws = Workspace(ws_dir, backend=backend)
    first = ws.branch("first", on_success=None)
    second = ws.branch("second", on_success=None)
    (Path(first.path) / "reports" / "a.md").write_text("a\n")
    (Path(second.path) / "reports" / "b.md").write_text("b\n")
    first.commit()
    changes = second.changes()
    assert changes.lost_in_parent == []
    assert changed_since(changes, ws_dir, second.created_ns) == []
    files, dirs = branch_files(Path(second.path), changes)
    land_files(ws, files, dirs=dirs, since_ns=second.created_ns, source_root=Path(second.path))
    assert sorted(p.name for p in (ws_dir / "reports").iterdir()) == ["a.md", "b.md", "index.md"]
    second.abort()
