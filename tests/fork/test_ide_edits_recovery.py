"""Issue 17.2, follow-up: edits made in the mirror while no forkdeck process watched the
fork (after a kill, before the fork is reopened) are the user's, not stale copies.

A real child process forks (overlay branches, live mirror) and is SIGKILLed; the user then
edits the mirror it left; ``ForkCoordinator.recover(..., materialize=True)`` reopens the
fork. The mirror's saved stamps tell the user's edits from the mirror's own copies: an
edit the branch did not race is applied to the branch and its model is told; a path the
branch changed too is a conflict, the user's version kept aside, nothing overwritten.
"""

from __future__ import annotations

from pathlib import Path

from branching_core.fork.mirror.edit_intake import STAMPS_FILE
from branching_core.live import ForkCoordinator
from tests.fork.test_ide_edits import NOTE_MARK, project
from tests.fork.test_mirror import CHILD, _agent, aeventually, files_under, read
from tests.support.killed_child import run_until_ready_then_kill

__all__ = ["project"]

# The child of test_mirror.py, plus: once everything is mirrored, its watchers stop and
# branch b writes README.txt; then the kill. (A process killed between a branch's write
# and the mirror's sync of it, as the mirror saw it: the mirror still shows "sed-b".)
_MARK = '    print("READY", coord.fork_id, flush=True)'
assert _MARK in CHILD
CHILD_B_WROTE = CHILD.replace(
    _MARK,
    "    mat.stop()\n"
    "    import pathlib\n"
    "    b = pathlib.Path(coord.get_branch('b').path) / 'README.txt'\n"
    "    b.write_text('branch b, unmirrored\\n')\n" + _MARK,
)


async def test_edits_made_while_no_process_watched_reach_the_branch_at_recovery(
    project: Path,
) -> None:
    fork_id = run_until_ready_then_kill(CHILD_B_WROTE, str(project))
    fork_dir = project / ".pydantic-deep" / "forks" / fork_id
    assert (fork_dir / STAMPS_FILE).is_file()
    mirror = fork_dir / "branches"
    assert read(mirror / "b" / "README.txt") == "sed-b\n"
    # The user edits the mirror while nothing runs: a change, a new file, a deletion, and
    # a file the branch changed too (b's README.txt).
    (mirror / "a" / "src" / "app.py").write_text("VALUE = 'mine'\n")
    (mirror / "a" / "notes.txt").write_text("new while closed\n")
    (mirror / "a" / "README.txt").unlink()
    (mirror / "b" / "README.txt").write_text("user b\n")

    [coord] = ForkCoordinator.recover(project, _agent({}), materialize=True)
    mat = coord.mirror_hook.materializer
    assert mat is not None and mat.watching and mat.fork_id == fork_id
    a_path, b_path = coord.get_branch("a").path, coord.get_branch("b").path
    assert a_path is not None and b_path is not None
    a, b = Path(a_path), Path(b_path)
    await aeventually(lambda: read(a / "src" / "app.py") == "VALUE = 'mine'\n", "edit applied")
    await aeventually(lambda: read(a / "notes.txt") == "new while closed\n", "file created")
    await aeventually(lambda: not (a / "README.txt").exists(), "deletion applied")
    await aeventually(lambda: "b" in coord.edit_conflicts(), "the conflict reported")
    await aeventually(
        lambda: (
            sorted(coord.user_edits().get("a", [])) == ["README.txt", "notes.txt", "src/app.py"]
        ),
        "the edits reported",
    )
    # the model of branch a is told at its next request (held: the branch is not running)
    [note] = [m for m in coord.get_branch("a").queue.held if NOTE_MARK in m]
    assert "src/app.py (modified, +1 -1)" in note and "notes.txt (created" in note
    assert "README.txt (deleted)" in note
    # b: both changed it. The branch keeps its version, the user's is kept aside, and the
    # mirror shows the branch's version again; nothing is overwritten.
    [conflict] = coord.edit_conflicts()["b"]
    assert conflict.path == "README.txt" and conflict.kept_as is not None
    assert conflict.kept_as.read_text() == "user b\n"
    assert read(b / "README.txt") == "branch b, unmirrored\n"
    await aeventually(
        lambda: read(mat.branch_path("b", "README.txt")) == "branch b, unmirrored\n", "re-mirrored"
    )
    assert "b" not in coord.user_edits() or coord.user_edits()["b"] == ["README.txt"]
    assert files_under(mat.branch_dir("a")) == {
        "src/app.py": "VALUE = 'mine'\n",
        "notes.txt": "new while closed\n",
    }
    await coord.merge_or_select("pick:a")
    assert (project / "src" / "app.py").read_text() == "VALUE = 'mine'\n"
    assert (project / "notes.txt").read_text() == "new while closed\n"
    await coord.aclose()
