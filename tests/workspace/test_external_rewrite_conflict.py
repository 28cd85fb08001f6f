"""A file that any writer outside forkdeck rewrites in a branch is a file the parent had.

Editors, ``sed -i``, agent CLIs (Claude Code, Codex, aider) and every program run in a
sandbox save by temp file + rename. In an overlay branch the renamed upper file carries
no ``overlay.origin`` xattr, so it looked exactly like a file the branch created
(``existed=False``): a parent deletion of that file meanwhile was no conflict and the
commit brought the deleted file back. Only forkdeck's own tools told the branch
(``note_replacing``). The rule now also judges from the parent's side (see
``changes.find_conflicts`` and ``workspace.landed``): whatever the parent's landings
changed (a sibling's commit, a pick, combine) is judged exactly for every writer, and so
is a change by hand on copy and reflink and at the top level. On overlay a removal by
hand in a subdirectory also changed by hand stays unseen for an outside writer's rewrite
(``OVERLAY_HAND_LIMIT``, tested as such below).

Real overlay mounts, real ``sed`` and Python processes, real sandboxes; every backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from branching_core import ConflictError, Workspace
from branching_core.sandbox import run_command
from branching_core.workspace.apply import changed_since
from branching_core.workspace.land import branch_files, land_files
from tests.workspace.treeutil import snapshot

OVERLAY_HAND_LIMIT = (
    "overlay: a file an outside writer renamed over the parent's looks new, and a removal "
    "by hand in a directory changed by hand leaves no record; judging it a conflict would "
    "refuse every file a branch adds beside an editor's save or a __pycache__ (the "
    "documented trade-off in docs/workspaces.md; see test_overlay_cannot_see_a_hand_removal)"
)
TICK = 0.02  # ctimes come from the kernel's coarse clock (one tick, 4 ms at HZ=250)
PY_REPLACE = (
    "import os, sys, tempfile\n"
    "path = sys.argv[1]\n"
    "fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))\n"
    "with os.fdopen(fd, 'w') as fh:\n"
    "    fh.write(open(path).read().replace('b', 'rewritten by python'))\n"
    "os.replace(tmp, path)\n"
)


def _rewrite(writer: str, branch_path: Path, rel: str) -> None:
    """``rel`` rewritten by temp file + rename, by a process that is not forkdeck's."""
    if writer == "sed":
        subprocess.run(["sed", "-i", "s/b/rewritten by sed/", rel], cwd=branch_path, check=True)
    elif writer == "python":
        subprocess.run([sys.executable, "-c", PY_REPLACE, str(branch_path / rel)], check=True)
    else:  # in the branch's sandbox, as the agent's run_command tool runs commands
        command: str | list[str] = (
            f"sed -i 's/b/rewritten in the sandbox/' {rel}"
            if writer == "sandbox-sed"
            else [sys.executable, "-c", PY_REPLACE, rel]
        )
        result = run_command(command, branch_path, timeout=60)
        assert result.exit_code == 0, result
    assert "rewritten" in (branch_path / rel).read_text()


def _parent_changes(action: str, root: Path, rel: str) -> None:
    target = root / rel
    if action == "delete":
        target.unlink()
    elif action == "rename-away":
        target.rename(target.with_name("elsewhere.txt"))
    else:
        target.write_text("the parent's own edit\n")


def _landed_change(ws: Workspace, action: str, rel: str) -> None:
    """The parent's change made by one of forkdeck's landings: a sibling's commit."""
    sibling = ws.branch("sibling", on_success=None)
    _parent_changes(action, sibling.path, rel)
    sibling.commit()


# every backend, every parent change, made by a landing or by hand; not on overlay a
# removal by hand (OVERLAY_HAND_LIMIT: test_overlay_cannot_see_a_hand_removal_...)
CASES = [
    (backend, how, action)
    for backend in ("overlay", "reflink", "copy")
    for how in ("landing", "hand")
    for action in ("delete", "rename-away", "modify")
    if not (backend == "overlay" and how == "hand" and action != "modify")
]


@pytest.mark.parametrize("writer", ["sed", "python", "sandbox-sed", "sandbox-python"])
@pytest.mark.parametrize(("backend", "how", "action"), CASES, indirect=["backend"])
def test_a_parent_change_to_a_file_an_outside_writer_rewrote_is_a_conflict(
    ws_dir: Path, backend: str, writer: str, action: str, how: str
) -> None:
    ws = Workspace(ws_dir, backend=backend)
    branch = ws.branch("b")
    time.sleep(TICK)
    _rewrite(writer, branch.path, "sub/b.txt")
    assert branch.changes().modified == ["sub/b.txt"]
    if how == "hand":
        _parent_changes(action, ws_dir, "sub/b.txt")
    else:
        _landed_change(ws, action, "sub/b.txt")
    expected = snapshot(ws_dir)
    changes = branch.changes()
    assert changed_since(changes, ws_dir, branch.created_ns) == ["sub/b.txt"]
    if action != "modify":
        assert changes.lost_in_parent == ["sub/b.txt"]
    with pytest.raises(ConflictError) as caught:
        branch.commit()
    # after a sibling's landing the whole commit is refused as stale (a pick then lands
    # path by path, and the paths above are its conflicts); by hand, the path is named
    assert caught.value.paths == ([] if how == "landing" else ["sub/b.txt"])
    assert snapshot(ws_dir) == expected, "the refused commit changed the parent"
    if branch.is_open:  # a stale branch is discarded by its refused commit
        branch.abort()
    ws.close()


def test_a_file_made_again_after_the_parent_deleted_it_is_a_conflict(
    ws_dir: Path, backend: str
) -> None:
    """A sibling's landing deletes ``sub/b.txt`` first; the branch then writes one there.
    On the copy backend the branch's copy still had it; on overlay its view lost it.
    Either way the parent held it when the branch was made: a conflict, as at the top
    level."""
    ws = Workspace(ws_dir, backend=backend)
    branch = ws.branch("b")
    time.sleep(TICK)
    _landed_change(ws, "delete", "sub/b.txt")
    write = "import sys; open(sys.argv[1], 'w').write('again\\n')"
    subprocess.run([sys.executable, "-c", write, str(branch.path / "sub" / "b.txt")], check=True)
    expected = snapshot(ws_dir)
    changes = branch.changes()
    assert changes.lost_in_parent == ["sub/b.txt"]
    assert changed_since(changes, ws_dir, branch.created_ns) == ["sub/b.txt"]
    with pytest.raises(ConflictError):
        branch.commit()
    assert snapshot(ws_dir) == expected
    if branch.is_open:  # a stale branch is discarded by its refused commit
        branch.abort()
    ws.close()


def test_a_sibling_landing_that_deleted_the_rewritten_file_is_a_conflict(
    ws_dir: Path, backend: str
) -> None:
    """The parent's own record says which paths its landings removed: a sibling that
    deleted ``sub/b.txt`` conflicts with one that rewrote it, path by path too."""
    (ws_dir / "sub" / "keep.txt").write_text("keep\n")
    ws = Workspace(ws_dir, backend=backend)
    first = ws.branch("first", on_success=None)
    second = ws.branch("second", on_success=None)
    time.sleep(TICK)
    (first.path / "sub" / "b.txt").unlink()
    (first.path / "sub" / "new.txt").write_text("new\n")
    _rewrite("sed", second.path, "sub/b.txt")
    first.commit()
    changes = second.changes()
    assert changes.lost_in_parent == ["sub/b.txt"]
    assert changed_since(changes, ws_dir, second.created_ns) == ["sub/b.txt"]
    second.abort()
    ws.close()


def test_siblings_rewriting_and_adding_in_one_directory_stay_conflict_free(
    ws_dir: Path, backend: str
) -> None:
    """The other way round: one sibling adds files (and a directory) beside the ones the
    other rewrites or adds; the first landing changes the directory, yet nothing the
    second wrote was removed from the parent, so it all lands."""
    (ws_dir / "sub" / "c.txt").write_text("c\n")
    ws = Workspace(ws_dir, backend=backend)
    first = ws.branch("first", on_success=None)
    second = ws.branch("second", on_success=None)
    time.sleep(TICK)
    (first.path / "sub" / "from_first.txt").write_text("1\n")
    (first.path / "sub" / "dir1").mkdir()
    (first.path / "sub" / "dir1" / "x.txt").write_text("x\n")
    _rewrite("sed", second.path, "sub/b.txt")
    (second.path / "sub" / "from_second.txt").write_text("2\n")
    (second.path / "sub" / "dir2").mkdir()
    (second.path / "sub" / "dir2" / "y.txt").write_text("y\n")
    first.commit()
    changes = second.changes()
    assert changes.lost_in_parent == []
    assert changed_since(changes, ws_dir, second.created_ns) == []
    files, dirs = branch_files(second.path, changes)
    land_files(ws, files, dirs=dirs, since_ns=second.created_ns, source_root=second.path)
    assert sorted(os.listdir(ws_dir / "sub")) == [
        "b.txt", "c.txt", "dir1", "dir2", "from_first.txt", "from_second.txt"
    ]
    assert "rewritten by sed" in (ws_dir / "sub" / "b.txt").read_text()
    second.abort()
    ws.close()


def test_a_file_renamed_away_and_back_in_the_branch(ws_dir: Path, backend: str) -> None:
    """``mv b.txt x; mv x b.txt`` then an edit: the parent's deletion conflicts."""
    ws = Workspace(ws_dir, backend=backend)
    branch = ws.branch("b")
    time.sleep(TICK)
    sub = branch.path / "sub"
    subprocess.run("mv b.txt x.txt && mv x.txt b.txt && echo more >> b.txt", shell=True,
                   cwd=sub, check=True)
    (ws_dir / "sub" / "b.txt").unlink()
    with pytest.raises(ConflictError) as caught:
        branch.commit()
    assert caught.value.paths == ["sub/b.txt"]
    assert not (ws_dir / "sub" / "b.txt").exists()
    branch.abort()
    ws.close()


def test_a_hard_link_forced_over_a_parent_file(ws_dir: Path, backend: str) -> None:
    """``ln -f new b.txt`` replaces the parent's file by another inode (as a rename does)."""
    ws = Workspace(ws_dir, backend=backend)
    branch = ws.branch("b")
    time.sleep(TICK)
    sub = branch.path / "sub"
    subprocess.run("echo linked > ../linked.txt && ln -f ../linked.txt b.txt", shell=True,
                   cwd=sub, check=True)
    _landed_change(ws, "delete", "sub/b.txt")
    changes = branch.changes()
    assert changes.lost_in_parent == ["sub/b.txt"]
    assert changed_since(changes, ws_dir, branch.created_ns) == ["sub/b.txt"]
    with pytest.raises(ConflictError):
        branch.commit()
    assert not (ws_dir / "sub" / "b.txt").exists()
    assert not (ws_dir / "linked.txt").exists(), "a refused commit landed nothing"
    if branch.is_open:  # a stale branch is discarded by its refused commit
        branch.abort()
    ws.close()


def test_a_directory_replaced_by_rename(ws_dir: Path, backend: str) -> None:
    """The branch rebuilds ``sub`` beside it and renames it into place (as code
    generators and ``rsync --delay-updates`` do); the parent deleted ``sub/b.txt``."""
    ws = Workspace(ws_dir, backend=backend)
    branch = ws.branch("b")
    time.sleep(TICK)
    script = "cp -r sub sub.new && echo more >> sub.new/b.txt && rm -rf sub && mv sub.new sub"
    subprocess.run(script, shell=True, cwd=branch.path, check=True)
    (ws_dir / "sub" / "b.txt").unlink()
    expected = snapshot(ws_dir)
    with pytest.raises(ConflictError) as caught:
        branch.commit()
    assert caught.value.paths
    assert snapshot(ws_dir) == expected
    branch.abort()
    ws.close()


def test_a_branch_deleting_a_file_the_parent_modified(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    branch = ws.branch("b")
    time.sleep(TICK)
    subprocess.run(["rm", "sub/b.txt"], cwd=branch.path, check=True)
    (ws_dir / "sub" / "b.txt").write_text("the parent's own edit\n")
    with pytest.raises(ConflictError) as caught:
        branch.commit()
    assert caught.value.paths == ["sub/b.txt"]
    assert (ws_dir / "sub" / "b.txt").read_text() == "the parent's own edit\n"
    branch.abort()
    ws.close()


@pytest.mark.parametrize("backend", ["reflink", "copy"], indirect=True)
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_hand_deletion_beside_a_recorded_landing_is_still_a_conflict(
    ws_dir: Path, backend: str, when: str
) -> None:
    """A sibling's landing changed the directory too, but the record only vouches for the
    directory while every change since the fork is one of its landings: a deletion by hand
    before or after it leaves the rewritten file a conflict (not on overlay, where the
    rewrite looks new: ``OVERLAY_HAND_LIMIT``)."""
    (ws_dir / "sub" / "c.txt").write_text("c\n")
    ws = Workspace(ws_dir, backend=backend)
    first = ws.branch("first", on_success=None)
    second = ws.branch("second", on_success=None)
    time.sleep(TICK)
    (first.path / "sub" / "c.txt").write_text("first's edit\n")  # its landing renames into sub
    _rewrite("sed", second.path, "sub/b.txt")
    if when == "before":
        (ws_dir / "sub" / "b.txt").unlink()
        time.sleep(TICK)
    first.commit()
    if when == "after":
        time.sleep(TICK)
        (ws_dir / "sub" / "b.txt").unlink()
    changes = second.changes()
    assert changes.lost_in_parent == ["sub/b.txt"]
    assert changed_since(changes, ws_dir, second.created_ns) == ["sub/b.txt"]
    second.abort()
    ws.close()


def test_a_nested_parent_keeps_its_record_only_while_it_exists(ws_dir: Path, backend: str) -> None:
    """Landings into a branch are recorded under that branch's id in the store and
    forgotten with it; the rule works the same one level down."""
    ws = Workspace(ws_dir, backend=backend)
    outer = ws.branch("outer", on_success=None)
    first = outer.branch("first", on_success=None)
    second = outer.branch("second", on_success=None)
    time.sleep(TICK)
    (first.path / "sub" / "b.txt").unlink()
    _rewrite("python", second.path, "sub/b.txt")
    first.commit()
    record = ws.tree.store.root / "gen" / f"{outer.id}.landed"
    assert record.exists()
    assert second.changes().lost_in_parent == ["sub/b.txt"]
    with pytest.raises(ConflictError):
        second.commit()  # stale: a sibling committed first
    outer.abort()
    assert not record.exists()
    ws.close()


def test_overlay_cannot_see_a_hand_removal_beside_a_hand_change(ws_dir: Path) -> None:
    """The trade-off, stated as a test so a change to it is a decision: on overlay a file
    an outside writer renamed over the parent's, then removed from the parent by hand in
    a subdirectory changed by hand, lands again; a file of the branch's own beside an
    ordinary hand change to that directory lands too (the case the trade-off is for)."""
    ws = Workspace(ws_dir, backend="overlay")
    branch = ws.branch("b")
    time.sleep(TICK)
    _rewrite("sed", branch.path, "sub/b.txt")
    (branch.path / "sub" / "mine.txt").write_text("the branch's new file\n")
    (ws_dir / "sub" / "b.txt").unlink()  # by hand
    (ws_dir / "sub" / "__pycache__").mkdir()  # any program run in the parent
    branch.commit()
    assert "rewritten by sed" in (ws_dir / "sub" / "b.txt").read_text()
    assert (ws_dir / "sub" / "mine.txt").read_text() == "the branch's new file\n"
    ws.close()
