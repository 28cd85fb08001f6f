"""The pick's faster landing (issue 29) keeps what a merge reports and records.

The merge now learns what it changes from the commit's own collection
(``Branch.commit(on_ready=...)``) instead of listing the branch a second time, starts the
post-fork file record once the fork is settled, and fsyncs the settled manifest in the
background. These tests pin what must not move with that: the report (files, not the
directories holding them; deletions), the pre-merge record a rewind restores, the
manifest on disk the moment the merge returns, and the hook's refusal semantics.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic_ai import Agent

from branching_core.errors import CommitError
from branching_core.fork import BranchSpec, ForkCoordinator, ForkStore
from branching_core.workspace import Workspace
from branching_core.workspace.changes import Op

from .helpers import Scripted, call


async def test_report_lists_files_of_a_new_tree_and_deletions_not_directories(
    ws: Workspace, project: Path, runner: object
) -> None:
    (project / "gone.txt").write_text("bye\n")
    coord = ForkCoordinator(Agent(Scripted({"A": []}).model), workspace=ws, command_runner=runner)
    handle = await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=20)
    view = coord.get_branch("a").path
    assert view is not None
    (view / "pkg" / "sub").mkdir(parents=True)
    (view / "pkg" / "sub" / "m.py").write_text("M = 1\n")
    (view / "pkg" / "init.py").write_text("\n")
    (view / "src" / "app.py").write_text("VALUE = 3\n")
    (view / "gone.txt").unlink()
    (view / "link").symlink_to("pkg")  # a link to a directory is a file, not a directory

    result = await coord.merge_or_select("pick:a")

    assert result.applied_paths == ["link", "pkg/init.py", "pkg/sub/m.py", "src/app.py"]
    assert result.deleted_paths == ["gone.txt"]
    assert result.applied_changes == 5 and not result.conflicts and not result.errors
    # the settled manifest is in place when the merge returns, before any flush()
    manifest = json.loads(ForkStore(project).manifest_path(handle.fork_id).read_text())
    assert manifest["resolved"] and manifest["resolution"] == f"pick:{result.winner_branch_id}"
    await coord.flush()
    # the pre-merge record still restores the parent as it was before the merge
    await coord.rewind_to_checkpoint(f"fork:{handle.fork_id}")
    assert (project / "gone.txt").read_text() == "bye\n"
    assert (project / "src" / "app.py").read_text() == "VALUE = 1\n"
    assert not (project / "pkg" / "init.py").exists()


async def test_a_conflicting_pick_still_lands_the_rest_path_by_path(
    ws: Workspace, project: Path, runner: object
) -> None:
    s = Scripted(
        {"A": [call("write_file", path="src/app.py", content="A\n"),
               call("write_file", path="a.txt", content="a\n")]}
    )
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=20)
    (project / "src" / "app.py").write_text("parent\n")  # changed in the parent meanwhile

    result = await coord.merge_or_select("pick:a")
    await coord.flush()

    assert result.conflicts == ["src/app.py"]
    assert result.applied_paths == ["a.txt"]
    assert (project / "src" / "app.py").read_text() == "parent\n"
    assert (project / "a.txt").read_text() == "a\n"


def test_on_ready_sees_the_ops_and_its_failure_leaves_the_branch_open(project: Path) -> None:
    ws = Workspace(project)
    seen: list[tuple[list[Op], Path]] = []
    with ws.branch("hook", on_success=None) as b:
        (b.path / "new.txt").write_text("n\n")
        (b.path / "src" / "app.py").write_text("VALUE = 9\n")

        def refuse(ops: list[Op], parent_root: Path) -> None:
            seen.append((ops, parent_root))
            raise OSError(28, "no space for the caller's record")

        with pytest.raises(CommitError, match="nothing was applied"):
            b.commit(on_ready=refuse)
        assert b.is_open and (b.path / "new.txt").read_text() == "n\n"
        assert not (project / "new.txt").exists()
        assert (project / "src" / "app.py").read_text() == "VALUE = 1\n"
        ops, root = seen[0]
        assert root == project.resolve() or root == project
        assert sorted(op.path for op in ops if op.kind == "put") == ["new.txt", "src/app.py"]
        b.commit(on_ready=lambda ops, root: seen.append((ops, root)))
    assert (project / "new.txt").read_text() == "n\n"
    assert len(seen) == 2
