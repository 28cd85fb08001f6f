"""A file the agent's tools rewrite in a branch is *modified*, never *created*.

The tools used to replace files by temp file + rename. In an overlay branch the new
upper file then carries no ``overlay.origin`` xattr, which the change collection reads
as "the branch created this file" (``existed=False``): a parent deletion of that file
meanwhile was no conflict, and the commit silently brought the deleted file back. The
same edit made in place (``Path.write_text``) was a conflict, as the rule says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core import ConflictError, Workspace
from branching_core.agent.toolset import WorkspaceToolset


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_a_tool_rewrite_of_a_file_the_parent_deleted_is_a_conflict(
    ws_dir: Path, backend: str, tool: str
) -> None:
    ws = Workspace(ws_dir, backend=backend)
    b = ws.branch("agent")
    tools = WorkspaceToolset(b.path, on_replace=b.note_replacing)
    if tool == "write_file":
        out = tools.write_file("sub/b.txt", "the agent kept working on it\n")
        assert out.startswith("overwrote"), out
    else:
        tools.edit_file("sub/b.txt", "b\n", "the agent kept working on it\n")
    assert "sub/b.txt" in b.changes().modified
    (ws_dir / "sub" / "b.txt").unlink()
    with pytest.raises(ConflictError) as info:
        b.commit()
    assert info.value.paths == ["sub/b.txt"]
    assert not (ws_dir / "sub" / "b.txt").exists()
    b.abort()
    ws.close()


def test_a_tool_rewrite_is_reported_as_modified(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    b = ws.branch("agent")
    WorkspaceToolset(b.path, on_replace=b.note_replacing).write_file("sub/b.txt", "new\n")
    changes = b.changes()
    assert changes.modified == ["sub/b.txt"] and changes.created == [], changes
    b.commit()
    assert (ws_dir / "sub" / "b.txt").read_text() == "new\n"
    ws.close()
