"""Issue 17.2: edit a branch in your IDE (its mirror directory), and the branch sees it.

Real parts only: ``Workspace`` branches (overlay), the real ``watchfiles`` watcher of the
mirror, real pydantic-ai ``Agent``s driven by ``FunctionModel``. Waiting polls with a
generous deadline; no test asserts a duration.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from branching_core.fork import (
    BranchEditConflict,
    BranchEditRefused,
    BranchSpec,
    BranchUserEdited,
    ForkEvent,
)
from branching_core.fork.mirror.edit_intake import branch_held as _branch_held
from branching_core.fork.mirror.edits import EditBatch
from branching_core.fork.mirror.materializer import ForkMaterializer
from branching_core.live import ForkCoordinator
from branching_core.workspace import Workspace
from tests.fork.helpers import Scripted, call
from tests.fork.test_mirror import aeventually, eventually, files_under, read

NOTE_MARK = "the user edited files of this branch in their editor"
PARENT = [ModelRequest(parts=[UserPromptPart("parent")])]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("VALUE = 1\n")
    (root / "src" / "util.py").write_text("def f():\n    return 1\n")
    (root / "README.txt").write_text("hello\n")
    return root


def _notes(messages: list[ModelMessage]) -> list[str]:
    return [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart) and isinstance(p.content, str) and NOTE_MARK in p.content
    ]


def _collect(coord: ForkCoordinator) -> list[ForkEvent]:
    seen: list[ForkEvent] = []
    coord.add_listener(seen.append)
    return seen


async def mirrored_fork(
    project: Path, s: Scripted, *labels: str, wait: bool = True
) -> tuple[ForkCoordinator, list[ForkEvent], ForkMaterializer]:
    """A mirrored fork of ``s``'s agent with one branch per label (running the script of
    the label in capitals), its events collected; ``wait`` for the branches to finish."""
    coord = ForkCoordinator(Agent(s.model), workspace=project, materialize=True)
    events = _collect(coord)
    specs = [BranchSpec(label, label.upper()) for label in labels]
    await coord.fork(specs, parent_history=PARENT)
    if wait:
        await coord.wait(timeout=60)
    mat = coord.mirror_hook.materializer
    assert mat is not None
    return coord, events, mat


class _Mirror:
    """A started materializer over fresh overlay branches, batches collected."""

    def __init__(self, project: Path, *labels: str, backend: str = "overlay") -> None:
        ws = Workspace(project, backend=backend)
        assert ws.fstype == backend
        self.branches = {label: ws.branch(label, durable=True) for label in labels}
        self.mat = ForkMaterializer(project, "f-ide")
        for label, branch in self.branches.items():
            self.mat.add_branch(label, branch)
        self.batches: list[EditBatch] = []
        self.mat.on_edits = self.batches.append
        self.mat.start()

    def view(self, label: str, rel: str) -> Path:
        return Path(self.branches[label].path) / rel

    def mirror(self, label: str, rel: str) -> Path:
        return self.mat.branch_path(label, rel)

    def edits(self) -> list[str]:
        return [e.path for b in self.batches for e in b.edits]


# -- the coordinator: the view and the model's next request ---------------------------------


async def test_a_mirror_write_reaches_the_branch_view_and_the_next_request(project: Path) -> None:
    edited = asyncio.Event()

    async def wait_for_the_user(_messages: list[ModelMessage]) -> Any:
        await asyncio.wait_for(edited.wait(), 30)
        return call("read_file", path="src/app.py")

    s = Scripted(
        {"A": [call("write_file", path="src/app.py", content="VALUE = 'a'\n"), wait_for_the_user]}
    )
    coord, events, mat = await mirrored_fork(project, s, "a", wait=False)
    rt = coord.get_branch("a")
    assert mat is not None and rt.path is not None
    mirrored = mat.branch_path("a", "src/app.py")
    await aeventually(lambda: read(mirrored) == "VALUE = 'a'\n", "the branch's write mirrored")

    mirrored.write_text("VALUE = 'from my editor'\n")  # what an IDE does
    await aeventually(
        lambda: any(isinstance(e, BranchUserEdited) for e in events), "the edit reported"
    )
    assert (Path(rt.path) / "src" / "app.py").read_text() == "VALUE = 'from my editor'\n"
    edited.set()
    await coord.wait(timeout=60)

    [event] = [e for e in events if isinstance(e, BranchUserEdited)]
    assert event.label == "a" and event.paths == ("src/app.py",)
    assert event.summaries == ("src/app.py (modified, +1 -1)",)
    requests = s.requests_for("A")
    assert len(requests) == 3
    # the request after the edit carries the note, with the diff; the tool saw the file
    [note] = _notes(requests[2])
    assert "- src/app.py (modified, +1 -1)" in note
    assert "-VALUE = 'a'" in note and "+VALUE = 'from my editor'" in note
    assert "VALUE = 'from my editor'" in str(requests[2][-1].parts)
    assert _notes(requests[1]) == []
    # exactly once in the branch's whole history
    assert len(_notes(rt.history)) == 1
    assert coord.user_edits() == {"a": ["src/app.py"]}
    # and the merge lands the user's version
    await coord.merge_or_select("pick:a")
    assert (project / "src" / "app.py").read_text() == "VALUE = 'from my editor'\n"
    await coord.aclose()


async def test_the_mirrors_own_sync_writes_are_never_user_edits(project: Path) -> None:
    s = Scripted(
        {
            "A": [
                call("write_file", path="src/app.py", content="VALUE = 'a'\n"),
                call("run_command", command="sed -i 's/hello/hi/' README.txt && rm src/util.py"),
                call("write_file", path="new/deep/file.txt", content="x\n"),
                call("write_file", path="src/app.py", content="VALUE = 1\n"),  # a revert
            ],
            "B": [call("run_command", command="echo b > src/util.py && mkdir -p d && touch d/e")],
        }
    )
    coord, events, mat = await mirrored_fork(project, s, "a", "b")
    await aeventually(
        lambda: (
            files_under(mat.branch_dir("a")) == {"README.txt": "hi\n", "new/deep/file.txt": "x\n"}
        ),
        "branch a mirrored",
    )
    await aeventually(
        lambda: (
            files_under(mat.branch_dir("b"))
            == {"README.txt": "hello\n", "src/util.py": "b\n", "d/e": ""}
        ),
        "branch b mirrored",
    )
    # A barrier: the watcher handles batches in order, so once this user edit is reported
    # every event of the mirror's own writes above has been looked at.
    mat.branch_path("b", "sentinel.txt").write_text("mine\n")
    await aeventually(
        lambda: any(isinstance(e, BranchUserEdited) for e in events), "the sentinel edit"
    )
    reported = [e for e in events if isinstance(e, BranchUserEdited | BranchEditConflict)]
    assert [(e.label, getattr(e, "paths", ())) for e in reported] == [("b", ("sentinel.txt",))]
    assert coord.user_edits() == {"b": ["sentinel.txt"]}
    await coord.merge_or_select("abort")
    await coord.aclose()


@pytest.mark.parametrize("action", ["pick:a", "abort"])
async def test_the_watcher_stops_after_merge_and_abort(project: Path, action: str) -> None:
    s = Scripted({"A": [call("write_file", path="src/app.py", content="VALUE = 'a'\n")]})
    coord = ForkCoordinator(
        Agent(s.model), workspace=project, materialize=True, keep_artifacts=True
    )
    events = _collect(coord)
    handle = await coord.fork([BranchSpec("a", "A")], parent_history=PARENT)
    await coord.wait(timeout=60)
    mat = coord.mirror_hook.materializer
    assert mat is not None and mat.watching
    names = {f"fork-mirror-{handle.fork_id}", f"fork-ide-edits-{handle.fork_id}"}
    await aeventually(
        lambda: names <= {t.name for t in threading.enumerate()}, "both watchers running"
    )
    await coord.merge_or_select(action)
    assert not mat.watching and coord.mirror_hook.materializer is None
    assert not any(t.name in names for t in threading.enumerate())
    # the kept mirror is a plain directory now: writing there changes nothing anywhere
    kept = coord.store.fork_dir(handle.fork_id) / "branches" / "a" / "src" / "app.py"
    kept.write_text("too late\n")
    await asyncio.sleep(0.3)  # (no wall-clock assertion: just a chance to misbehave)
    assert not any(isinstance(e, BranchUserEdited) for e in events)
    want = "VALUE = 'a'\n" if action == "pick:a" else "VALUE = 1\n"
    assert (project / "src" / "app.py").read_text() == want
    await coord.aclose()


# -- the materializer: deletes, conflicts, path safety ---------------------------------------


@pytest.mark.parametrize("backend", ["overlay", "copy"])
def test_a_delete_in_the_mirror_deletes_in_the_branch(project: Path, backend: str) -> None:
    m = _Mirror(project, "a", "b", backend=backend)
    try:
        m.view("a", "src/app.py").write_text("VALUE = 'a'\n")
        m.view("b", "src/app.py").write_text("VALUE = 'b'\n")
        eventually(lambda: read(m.mirror("a", "src/app.py")) == "VALUE = 'a'\n", "mirrored")
        m.mirror("a", "src/app.py").unlink()
        eventually(lambda: not m.view("a", "src/app.py").exists(), "deleted in branch a")
        eventually(lambda: m.edits() == ["src/app.py"], "the deletion reported")
        assert m.batches[0].edits[0].operation == "deleted"
        assert m.branches["a"].changes().deleted == ["src/app.py"]
        # the sibling and the parent are untouched; the mirror shows the deletion
        assert m.view("b", "src/app.py").read_text() == "VALUE = 'b'\n"
        assert (project / "src" / "app.py").read_text() == "VALUE = 1\n"
        assert not m.mirror("a", "src/app.py").exists()
        # a whole directory removed in the mirror (here: created by the user, then removed)
        m.mirror("a", "pkg").mkdir()
        m.mirror("a", "pkg/x.py").write_text("x\n")
        eventually(lambda: read(m.view("a", "pkg/x.py")) == "x\n", "a new dir applied")
        import shutil

        shutil.rmtree(m.mirror("a", "pkg"))
        eventually(lambda: not m.view("a", "pkg/x.py").exists(), "the removed dir applied")
    finally:
        m.mat.close()


@pytest.mark.parametrize("backend", ["overlay", "copy"])
@pytest.mark.parametrize("user_change", ["delete", "edit"])
def test_a_sync_that_compared_the_entry_before_the_user_changed_it_keeps_the_change(
    project: Path, backend: str, user_change: str
) -> None:
    """The flake behind ``test_a_delete_in_the_mirror_deletes_in_the_branch[copy]``: a late
    watch event for the branch's write syncs the path again, finds the mirror entry equal
    to the view, and records it as the mirror's own (``StampBook.adopt``). When the user
    deleted or rewrote the entry between that comparison and the record, the record took
    the user's state for the mirror's: the change was never applied, and the next sync
    silently undid it. Holding the branch keeps both watchers out while this test replays
    that interleaving (compare, user change, record) in the same order every run."""
    m = _Mirror(project, "a", backend=backend)
    try:
        view, entry = m.view("a", "src/app.py"), m.mirror("a", "src/app.py")
        view.write_text("VALUE = 'a'\n")
        eventually(lambda: read(entry) == "VALUE = 'a'\n", "mirrored")
        m.mat.flush("a")  # every event of that write synced: the stamp is settled
        tree, dirname = m.mat.tree, m.mat._by_label("a").dirname
        with _branch_held(m.branches["a"]), tree.lock:
            # the late sync: the entry equals the view...
            assert entry.read_text() == view.read_text()
            # ...then the user changes it before the sync records it
            if user_change == "delete":
                entry.unlink()
            else:
                entry.write_text("VALUE = 'mine'\n")
            tree.stamps.adopt(dirname, "src/app.py", "same", view)
            assert tree.stamps.user_changed(dirname, "src/app.py")
        if user_change == "delete":
            eventually(lambda: not view.exists(), "the delete applied to the branch")
            assert not entry.exists()  # and the mirror did not bring the file back
        else:
            eventually(lambda: read(view) == "VALUE = 'mine'\n", "the edit applied")
            assert entry.read_text() == "VALUE = 'mine'\n"
        eventually(lambda: m.edits() == ["src/app.py"], "the change reported")
    finally:
        m.mat.close()


def test_a_simultaneous_branch_write_is_a_conflict_and_nothing_is_overwritten(
    project: Path,
) -> None:
    m = _Mirror(project, "a")
    try:
        m.view("a", "src/app.py").write_text("VALUE = 'branch 1'\n")
        eventually(lambda: read(m.mirror("a", "src/app.py")) == "VALUE = 'branch 1'\n", "synced")
        # Both sides change the file before the watcher gets to either write: holding the
        # branch (as a commit does) keeps the watcher out until both are on disk.
        with _branch_held(m.branches["a"]):
            m.view("a", "src/app.py").write_text("VALUE = 'branch 2'\n")
            m.mirror("a", "src/app.py").write_text("VALUE = 'user'\n")
        eventually(lambda: any(b.conflicts for b in m.batches), "the conflict reported")
        [conflict] = [c for b in m.batches for c in b.conflicts]
        assert conflict.path == "src/app.py" and conflict.kept_as is not None
        # the branch kept its version; the user's is kept aside; the mirror shows the branch's
        assert m.view("a", "src/app.py").read_text() == "VALUE = 'branch 2'\n"
        assert conflict.kept_as.read_text() == "VALUE = 'user'\n"
        assert conflict.kept_as == m.mat.fork_dir / "conflicts" / "a" / "src" / "app.py"
        eventually(
            lambda: read(m.mirror("a", "src/app.py")) == "VALUE = 'branch 2'\n", "re-mirrored"
        )
        assert m.edits() == []
        # a later edit of the same file (nothing pending on the branch side) applies again
        m.mirror("a", "src/app.py").write_text("VALUE = 'user 2'\n")
        eventually(lambda: read(m.view("a", "src/app.py")) == "VALUE = 'user 2'\n", "applied")
        # the user's first version is still kept; a second conflict never overwrites it
        with _branch_held(m.branches["a"]):
            m.view("a", "src/app.py").write_text("VALUE = 'branch 3'\n")
            m.mirror("a", "src/app.py").write_text("VALUE = 'user 3'\n")
        eventually(lambda: sum(len(b.conflicts) for b in m.batches) == 2, "second conflict")
        assert conflict.kept_as.read_text() == "VALUE = 'user'\n"
        second = [c for b in m.batches for c in b.conflicts][1].kept_as
        assert second is not None and second.read_text() == "VALUE = 'user 3'\n"
        assert m.view("a", "src/app.py").read_text() == "VALUE = 'branch 3'\n"
    finally:
        m.mat.close()


def test_symlinks_and_paths_through_them_are_refused(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("secret\n")
    m = _Mirror(project, "a")
    try:
        m.view("a", "src/app.py").write_text("VALUE = 'a'\n")
        eventually(lambda: m.mirror("a", "src/app.py").exists(), "mirrored")
        os.symlink(outside / "secret.py", m.mirror("a", "link.py"))
        os.symlink(outside, m.mirror("a", "escape"))
        eventually(lambda: len([r for b in m.batches for r in b.refused]) == 2, "refused")
        refused = sorted((r.path, r.reason) for b in m.batches for r in b.refused)
        assert [p for p, _ in refused] == ["escape", "link.py"]
        assert all("\n" not in reason and reason for _, reason in refused)
        # nothing applied: no link, nothing through it, the outside untouched
        assert not os.path.lexists(m.view("a", "link.py"))
        assert not os.path.lexists(m.view("a", "escape"))
        assert m.edits() == []
        assert sorted(p.name for p in outside.iterdir()) == ["secret.py"]
        # a write through the link lands outside the mirror: no event, nothing applied
        (m.mirror("a", "escape") / "secret.py").write_text("changed\n")
        m.mirror("a", "ok.py").write_text("fine\n")  # a barrier: later batches are handled
        eventually(lambda: read(m.view("a", "ok.py")) == "fine\n", "a regular edit applied")
        assert not os.path.lexists(m.view("a", "escape/secret.py"))
        eventually(lambda: m.edits() == ["ok.py"], "only the regular edit reported")
    finally:
        m.mat.close()


def test_coordinator_publishes_a_refusal(project: Path, tmp_path: Path) -> None:
    """The refusal reaches the coordinator's public event stream (what the TUI shows)."""

    async def scenario() -> list[ForkEvent]:
        s = Scripted({"A": [call("write_file", path="a.txt", content="a\n")]})
        coord, events, mat = await mirrored_fork(project, s, "a")
        mat.wait_ready()
        os.symlink("/etc/passwd", mat.branch_path("a", "passwd"))
        await aeventually(
            lambda: any(isinstance(e, BranchEditRefused) for e in events), "refusal published"
        )
        await coord.merge_or_select("abort")
        await coord.aclose()
        return events

    events = asyncio.run(scenario())
    [refused] = [e for e in events if isinstance(e, BranchEditRefused)]
    assert refused.label == "a" and refused.path == "passwd" and "symlink" in refused.reason


def test_editor_scratch_files_and_ide_metadata_are_not_edits(project: Path) -> None:
    m = _Mirror(project, "a")
    try:
        m.view("a", "src/app.py").write_text("VALUE = 'a'\n")
        eventually(lambda: m.mirror("a", "src/app.py").exists(), "mirrored")
        # what vim and a JetBrains IDE leave around a save, and the IDE's project folder
        for rel in ("src/.app.py.swp", "src/app.py~", "src/4913", ".idea/workspace.xml"):
            m.mirror("a", rel).parent.mkdir(parents=True, exist_ok=True)
            m.mirror("a", rel).write_text("scratch\n")
        m.mirror("a", "src/app.py").write_text("VALUE = 'saved'\n")
        eventually(lambda: read(m.view("a", "src/app.py")) == "VALUE = 'saved'\n", "the save")
        m.mirror("a", "barrier.txt").write_text("b\n")
        eventually(lambda: read(m.view("a", "barrier.txt")) == "b\n", "later batches handled")
        eventually(lambda: m.edits() == ["src/app.py", "barrier.txt"], "the two edits")
        assert sorted(m.branches["a"].changes().all_paths) == ["barrier.txt", "src/app.py"]
    finally:
        m.mat.close()


def test_an_edit_the_watcher_had_not_applied_survives_closing_the_mirror(project: Path) -> None:
    m = _Mirror(project, "a")
    m.view("a", "src/app.py").write_text("VALUE = 'a'\n")
    eventually(lambda: read(m.mirror("a", "src/app.py")) == "VALUE = 'a'\n", "mirrored")
    # saved in the moment between the watcher's last batch and the merge removing the
    # mirror (the watcher is stopped first here, so it surely never applies it)
    m.mat.stop()
    m.mirror("a", "src/app.py").write_text("VALUE = 'late'\n")
    m.mat.close()
    assert not m.mat.branches_dir.exists()
    kept = m.mat.fork_dir / "conflicts" / "a" / "src" / "app.py"
    assert kept.read_text() == "VALUE = 'late'\n"
    assert m.view("a", "src/app.py").read_text() == "VALUE = 'a'\n"


async def test_edits_reported_before_the_loop_is_known_wait_for_it(project: Path) -> None:
    """A mirror resumed outside the event loop (a recovered fork) still relays its edits:
    they wait until the coordinator's loop is known, then reach the branch."""
    from branching_core.fork.mirror.edit_relay import EditRelay
    from branching_core.fork.mirror.edits import UserEdit

    s = Scripted({"A": [call("write_file", path="a.txt", content="a\n")]})
    coord = ForkCoordinator(Agent(s.model), workspace=project)
    events = _collect(coord)
    await coord.fork([BranchSpec("a", "A")], parent_history=PARENT)
    await coord.wait(timeout=60)
    assert coord.fork_id is not None
    relay = await asyncio.to_thread(EditRelay, coord)  # made where no loop runs
    assert relay.loop is None
    batch = EditBatch("a", "a", edits=[UserEdit("a.txt", "modified", 1, 1, "@@ -1 +1 @@\n")])
    await asyncio.to_thread(relay.receiver(coord.fork_id), batch)  # the watcher thread
    assert not any(isinstance(e, BranchUserEdited) for e in events)
    relay.capture_loop()  # the next event the hook sees on the loop does this
    await aeventually(lambda: any(isinstance(e, BranchUserEdited) for e in events), "relayed")
    assert relay.edited_paths() == {"a": ["a.txt"]}
    assert [m for m in coord.get_branch("a").queue.held if NOTE_MARK in m] == [batch.note()]
    await coord.merge_or_select("abort")
    await coord.aclose()
