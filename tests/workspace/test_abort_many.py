"""``abort_many``: a batch of siblings thrown away in one call, and the batched paths of
``branch_many`` (one mount-helper round trip each way, no per-branch state files)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from branching_core import Workspace
from branching_core.errors import BranchClosedError, BranchError
from branching_core.workspace import mount_helper, reaper
from tests.workspace.treeutil import snapshot

REPO = Path(__file__).resolve().parents[2]


def _mounted_in_helper(ws: Workspace, *, spares: bool = False) -> list[str]:
    """Mount points under the store in the mount helper's namespace (overlay only);
    without ``spares``, not the spares mounted ahead for the next batch (``close()``
    removes those)."""
    helper = mount_helper.shared_helper()
    store = str(ws.tree.store.root)
    lines = Path(f"/proc/{helper.pid}/mounts").read_text().splitlines()
    points = [line.split()[1] for line in lines if store in line.split()[1]]
    return [p for p in points if spares or f"{store}/spare/" not in p]


def test_losers_are_discarded_in_one_call(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    kids = ws.branch_many([f"c{i}" for i in range(6)], on_success=None, on_error=None)
    for kid in kids:
        (kid.path / "out.txt").write_text(kid.name)
    views = [kid.path for kid in kids]
    kids[2].commit()
    losers = [k for k in kids if k is not kids[2]]
    ws.abort_many(losers)
    assert (ws_dir / "out.txt").read_text() == "c2"
    assert all(k.state == "aborted" for k in losers)
    assert ws.open_branches() == [] and ws.children == []
    assert ws.tree.store.branch_ids() == []
    assert not any(os.path.exists(v) for v in views)
    if backend == "overlay":
        assert _mounted_in_helper(ws) == []
    assert reaper.drain(30)
    assert list((ws.tree.store.root / "trash").iterdir()) == []
    ws.abort_many(losers)  # already aborted: nothing to do, no error


def test_children_of_the_discarded_go_too(ws_dir: Path, backend: str) -> None:
    ws = Workspace(ws_dir, backend=backend)
    a, b = ws.branch_many(["a", "b"], on_success=None, on_error=None)
    grandkids = a.branch_many(["x", "y"], on_success=None, on_error=None)
    (grandkids[0].path / "deep.txt").write_text("deep")
    ws.abort_many([a, b])
    assert all(g.state == "aborted" for g in [a, b, *grandkids])
    assert ws.open_branches() == [] and ws.tree.store.branch_ids() == []
    assert not (ws_dir / "deep.txt").exists()


def test_refused_batches_abort_nothing(ws_dir: Path, backend: str) -> None:
    """A committed sibling or a branch of another parent in the list: an error naming
    it, and every other branch of the list is still open and usable."""
    ws = Workspace(ws_dir, backend=backend)
    before = snapshot(ws_dir)
    a, b, c = ws.branch_many(["a", "b", "c"], on_success=None, on_error=None)
    nested = b.branch("n", on_success=None, on_error=None)
    (a.path / "a.txt").write_text("from a\n")
    a.commit()
    with pytest.raises(BranchClosedError, match="/main/a is already committed"):
        ws.abort_many([b, a, c])
    assert b.is_open and c.is_open
    (c.path / "still.txt").write_text("usable")
    with pytest.raises(BranchError, match="not a child branch of /main"):
        ws.abort_many([c, nested])
    assert c.is_open and nested.is_open
    ws.abort_many([b, c, b])  # duplicates are fine
    assert nested.state == "aborted"
    assert ws.open_branches() == [] and ws.tree.store.branch_ids() == []
    (ws_dir / "a.txt").write_text("a\n")
    assert snapshot(ws_dir) == before


def test_durable_siblings_reopen_after_a_batch(ws_dir: Path, backend: str) -> None:
    """Durable branches made by a batch are recorded like single ones: reopenable."""
    ws = Workspace(ws_dir, backend=backend)
    kept, dropped = ws.branch_many(["kept", "dropped"], on_success=None, durable=True)
    (kept.path / "k.txt").write_text("k")
    ws.abort_many([dropped])
    ws.close()  # durable: unmounted, kept in the store
    again = Workspace(ws_dir, backend=backend)
    assert [(i.name, i.durable) for i in again.list_branches()] == [("kept", True)]
    reopened = again.open_branch(kept.id)
    assert (reopened.path / "k.txt").read_text() == "k"
    reopened.commit()
    assert (ws_dir / "k.txt").read_text() == "k"


class _Calls:
    """Counts what this process asks the kernel for, via Python's audit hooks (real
    calls, nothing replaced): hooks cannot be removed, so one is installed for the
    session and counts only while ``active``."""

    def __init__(self) -> None:
        self.active = False
        self.seen: Counter[str] = Counter()
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active:
            return
        if event == "open":
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            mode = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
            writes = flags & (os.O_WRONLY | os.O_RDWR) or any(c in mode for c in "wax+")
            self.seen["open-write" if writes else "open-read"] += 1
        elif event in ("os.rename", "os.mkdir", "os.remove", "subprocess.Popen", "os.listdir"):
            self.seen[event] += 1

    @contextlib.contextmanager
    def count(self) -> Iterator[Counter[str]]:
        self.seen = Counter()
        self.active = True
        try:
            yield self.seen
        finally:
            self.active = False


_CALLS: _Calls | None = None


@pytest.fixture
def calls() -> Iterator[_Calls]:
    global _CALLS
    if _CALLS is None:
        _CALLS = _Calls()
    yield _CALLS


@pytest.mark.parametrize("backend", ["overlay"])
def test_a_batch_of_16_is_one_helper_round_trip_each_way(
    ws_dir: Path, backend: str, calls: _Calls
) -> None:
    """Overlay: branch_many(16) and abort_many(15) cost one helper request each; the
    caller makes no directory and writes no state file (the helper does, in the same
    request); discarding is one trash rename per branch, nothing else."""
    ws = Workspace(ws_dir, backend=backend)
    ws.branch("warm-up").abort()  # this process's session in the store is made once
    assert reaper.drain(30)  # (its removal runs in a thread the hook would count too)
    helper = mount_helper.shared_helper()
    trips = helper.round_trips
    with calls.count() as seen:
        kids = ws.branch_many([f"c{i}" for i in range(16)], on_success=None, on_error=None)
    assert helper.round_trips - trips == 1
    assert seen["os.mkdir"] == 0 and seen["open-write"] == 0 and seen["os.rename"] == 0, seen
    assert seen["os.listdir"] <= 1, seen  # the parent's top-level names, once per batch
    kids[0].commit()
    assert reaper.drain(30)
    trips = helper.round_trips
    with calls.count() as seen:
        ws.abort_many(kids[1:])
    assert helper.round_trips - trips == 1
    assert seen["os.rename"] == 15 and seen["open-write"] == 0 and seen["os.remove"] == 0, seen
    assert seen["os.mkdir"] <= 1, seen  # the trash directory, if it is gone
    assert seen["subprocess.Popen"] == 0, seen  # removal is queued to the reaper
    assert reaper.drain(30)
    assert _mounted_in_helper(ws) == [] and ws.tree.store.branch_ids() == []


@pytest.mark.parametrize("backend", ["copy"])
def test_copy_batch_writes_no_temp_files_and_runs_no_lister(
    ws_dir: Path, backend: str, calls: _Calls
) -> None:
    """Copy backend, small tree: no ``find`` child per branch (listed in process) and
    no temp-file-and-rename per state file: per branch, the copied files plus its meta,
    each written once (the manifest stays in memory: only durable branches need it on
    disk, to be reopened)."""
    ws = Workspace(ws_dir, backend=backend)
    ws.branch("warm-up").abort()  # this process's session in the store is made once
    assert reaper.drain(30)  # (its removal runs in a thread the hook would count too)
    files = sum(1 for p in ws_dir.rglob("*") if p.is_file())
    with calls.count() as seen:
        kids = ws.branch_many([f"c{i}" for i in range(16)], on_success=None, on_error=None)
    assert seen["subprocess.Popen"] == 0, seen
    assert seen["os.rename"] == 0, seen
    assert seen["open-write"] == 16 * (files + 1), seen
    with calls.count() as seen:
        ws.abort_many(kids)
    assert seen["os.rename"] == 16 and seen["subprocess.Popen"] == 0, seen


def _child(ws_dir: Path, backend: str, crash_at: str, *, durable: bool) -> dict[str, Any]:
    script = f"""
import json, sys
from pathlib import Path
from branching_core import Workspace
ws = Workspace(Path({str(ws_dir)!r}), backend={backend!r})
kids = ws.branch_many([f"c{{i}}" for i in range(6)], on_success=None, durable={durable})
for k in kids:
    (k.path / "out.txt").write_text(k.name)
print(json.dumps([k.id for k in kids]), flush=True)
ws.abort_many(kids)
print("done", flush=True)
"""
    env = {**os.environ, "PYTHONPATH": str(REPO), "FORKDECK_CRASH_AT": crash_at}
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return {"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr}


@pytest.mark.parametrize(
    ("backend", "crash_at"),
    [
        *[(b, "branch_many:made") for b in ("overlay", "reflink", "copy")],
        ("overlay", "discard:unmounted"),  # only overlay unmounts
        *[(b, "discard:moved:3") for b in ("overlay", "reflink", "copy")],
    ],
)
def test_sigkill_during_a_batch_leaves_nothing_but_durable_branches(
    ws_dir: Path, backend: str, crash_at: str
) -> None:
    """Killed after the helper made the batch, after it unmounted it, or half way through
    moving it to the trash: the next open removes every ordinary branch and its trash;
    the parent is untouched."""
    before = snapshot(ws_dir)
    ran = _child(ws_dir, backend, crash_at, durable=False)
    assert ran["rc"] == -9 and "done" not in ran["out"], ran
    ws = Workspace(ws_dir, backend=backend)
    assert ws.tree.store.branch_ids() == [] and ws.list_branches() == []
    assert list((ws.tree.store.root / "trash").iterdir()) == []
    assert snapshot(ws_dir) == before


def test_sigkill_half_way_through_discarding_durable_siblings(ws_dir: Path, backend: str) -> None:
    """Each durable sibling is either gone or still whole and reopenable."""
    ran = _child(ws_dir, backend, "discard:moved:3", durable=True)
    assert ran["rc"] == -9, ran
    ws = Workspace(ws_dir, backend=backend)
    left = ws.list_branches()
    assert [i.name for i in left] == ["c3", "c4", "c5"]
    for info in left:
        branch = ws.open_branch(info.id)
        assert (branch.path / "out.txt").read_text() == info.name
    ws.abort_many(ws.children)
    assert ws.tree.store.branch_ids() == []
    assert reaper.drain(30)
    assert list((ws.tree.store.root / "trash").iterdir()) == []


@pytest.mark.parametrize("backend", ["overlay"])
def test_umount_many_tries_every_target_and_names_the_failures(ws_dir: Path, backend: str) -> None:
    """One target that is not mounted (EINVAL) does not keep the others mounted; the
    error lists exactly the targets still in question."""
    ws = Workspace(ws_dir, backend=backend)
    a, b = ws.branch_many(["a", "b"], on_success=None, on_error=None)
    helper = mount_helper.shared_helper()
    views = [a._layout.store_dir / "view", b._layout.store_dir / "view"]
    bogus = ws.tree.store.root / "not-a-mount"
    bogus.mkdir()
    with pytest.raises(mount_helper.UmountError) as caught:
        helper.umount_many([views[0], bogus, views[1]])
    assert caught.value.failed == [bogus]
    assert _mounted_in_helper(ws) == []
    bogus.rmdir()
    a._layout.mounted = b._layout.mounted = False  # unmounted behind their backs above
    ws.abort_many([a, b])
    assert ws.tree.store.branch_ids() == []


@pytest.mark.parametrize("backend", ["overlay"])
def test_a_durable_branch_recorded_with_a_format_file_reopens_in_its_format(
    ws_dir: Path, backend: str
) -> None:
    """Branches made before the format moved into meta.json kept it in a ``format``
    file: reopening one still mounts it as made (redirect or userxattr)."""
    ws = Workspace(ws_dir, backend=backend)
    (kept,) = ws.branch_many(["kept"], on_success=None, durable=True)
    redirect = bool(kept._layout.extra.get("redirect"))
    (kept.path / "k.txt").write_text("k")
    ws.close()
    store_dir = ws.tree.store.branch_dir(kept.id)
    meta = json.loads((store_dir / "meta.json").read_text())
    assert meta.get("format") == ("redirect" if redirect else None)
    meta.pop("format", None)
    (store_dir / "meta.json").write_text(json.dumps(meta))
    if redirect:
        (store_dir / "format").write_text("redirect")
    again = Workspace(ws_dir, backend=backend)
    reopened = again.open_branch(kept.id)
    assert bool(reopened._layout.extra.get("redirect")) == redirect
    assert (reopened.path / "k.txt").read_text() == "k"
    reopened.abort()


def _spares(ws: Workspace) -> list[str]:
    spare = ws.tree.store.root / "spare"
    if not spare.exists():
        return []
    return sorted(p.name for p in spare.iterdir() if not p.name.endswith(".part"))


def _await_spares(ws: Workspace, count: int) -> list[str]:
    """The helper makes spares after its reply, and stops early when a request comes in:
    so watch the directory (no request) until ``count`` are there."""
    deadline = time.monotonic() + 30
    while len(_spares(ws)) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    return _spares(ws)


@pytest.mark.parametrize("backend", ["overlay"])
def test_the_next_batch_takes_spares_made_after_the_last_reply(ws_dir: Path, backend: str) -> None:
    """After answering a batch, the helper makes as many spare store directories (with
    their whiteout) for the next one, which takes them by rename; close() and a normal
    exit leave none."""
    ws = Workspace(ws_dir, backend=backend)
    first = ws.branch_many([f"a{i}" for i in range(4)], on_success=None, on_error=None)
    made = _await_spares(ws, 4)
    # a top-level batch's spares have their view mounted on the workspace already
    spare_root = f"{ws.tree.store.root}/spare/"
    assert sorted(p for p in _mounted_in_helper(ws, spares=True) if spare_root in p) == [
        f"{spare_root}{name}/view" for name in made
    ]
    assert len(made) == 4 and all(name.startswith(first[0].id) for name in made)
    one = ws.tree.store.root / "spare" / made[0]
    assert sorted(p.name for p in one.iterdir()) == ["upper", "view", "work"]
    assert os.major((one / "upper" / ".pydantic-deep").lstat().st_rdev) == 0
    second = ws.branch_many([f"b{i}" for i in range(4)], on_success=None, on_error=None)
    assert not set(made) & set(_spares(ws)), "the second batch did not take the spares"
    for kid in second:  # a branch made from a spare is an ordinary one
        (kid.path / "x.txt").write_text(kid.name)
        assert not (kid.path / ".pydantic-deep").exists()
        assert sorted(p.name for p in kid.path.iterdir()) == ["a.txt", "sub", "x.txt"]
    second[1].commit()
    assert (ws_dir / "x.txt").read_text() == "b1"
    ws.abort_many(first)
    ws.abort_many([k for k in second if k.is_open])
    ws.close()
    assert _spares(ws) == []
    assert _mounted_in_helper(ws, spares=True) == []
    assert reaper.drain(30)
    assert list((ws.tree.store.root / "trash").iterdir()) == []


@pytest.mark.parametrize("backend", ["overlay"])
def test_spares_of_a_killed_process_are_swept_and_exit_leaves_none(
    ws_dir: Path, backend: str
) -> None:
    script = f"""
import os, signal, sys, time
from pathlib import Path
from branching_core import Workspace
from branching_core.workspace import mount_helper
ws = Workspace(Path({str(ws_dir)!r}), backend={backend!r})
kids = ws.branch_many(["a", "b", "c"], on_success=None)
spare = ws.tree.store.root / "spare"
while not spare.exists() or len([n for n in os.listdir(spare) if "." not in n]) < 3:
    time.sleep(0.005)  # made by the helper after its reply
print(len(os.listdir(spare)), flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for how in ("exit", "kill"):
        ran = subprocess.run(
            [sys.executable, "-c", script, how],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert ran.stdout.strip() == "3", ran.stderr
        store_spare = Workspace(ws_dir, backend=backend).tree.store.root / "spare"
        # a normal exit removed them itself; after a kill, this open swept them
        assert not store_spare.exists() or list(store_spare.iterdir()) == []
        assert ran.returncode == (0 if how == "exit" else -9)


@pytest.mark.parametrize("backend", ["overlay"])
def test_a_forked_child_never_takes_its_parents_spares(ws_dir: Path, backend: str) -> None:
    """Pattern candidates may run in forked children: one that makes branches of its own
    starts from an empty pool (with its own mount helper) and leaves the parent's alone."""
    ws = Workspace(ws_dir, backend=backend)
    kids = ws.branch_many(["a", "b"], on_success=None, on_error=None)
    before = _await_spares(ws, 2)
    assert len(before) == 2
    pid = os.fork()
    if pid == 0:  # the child: branch, abort, and leave without any exit handler
        code = 1
        try:
            mine = ws.branch_many(["c1", "c2"], on_success=None, on_error=None)
            ws.abort_many(mine)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert set(before) <= set(_spares(ws)), "the child took the parent's spares"
    ws.abort_many(kids)
    again = ws.branch_many(["d", "e"], on_success=None, on_error=None)  # takes the spares
    assert not set(before) & set(_spares(ws))
    ws.abort_many(again)
    ws.close()


def test_sigkill_while_making_durable_siblings_leaves_none(ws_dir: Path, backend: str) -> None:
    """Durable branches outlive their process, but not a batch that never returned: the
    caller got none of them, so the next open removes every one (all or none)."""
    before = snapshot(ws_dir)
    ran = _child(ws_dir, backend, "branch_many:made", durable=True)
    assert ran["rc"] == -9 and ran["out"] == "", ran
    ws = Workspace(ws_dir, backend=backend)
    assert ws.list_branches() == [] and ws.tree.store.branch_ids() == []
    assert list((ws.tree.store.root / "batches").iterdir()) == []
    assert snapshot(ws_dir) == before
    # a batch that returned stays, like any durable branch
    kept = ws.branch_many(["k1", "k2"], on_success=None, durable=True)
    assert list((ws.tree.store.root / "batches").iterdir()) == []
    ws.close()
    again = Workspace(ws_dir, backend=backend)
    assert sorted(i.name for i in again.list_branches()) == ["k1", "k2"]
    again.abort_many([again.open_branch(k.id) for k in kept])


def test_a_torn_batch_marker_of_a_dead_process_is_just_removed(ws_dir: Path, backend: str) -> None:
    """Killed while writing the marker: none of its branches existed yet."""
    ws = Workspace(ws_dir, backend=backend)
    keeper = ws.branch("keeper", on_success=None, durable=True)
    ws.close()
    batches = ws.tree.store.root / "batches"
    (batches / "dead0000-1.json").write_text('["dead0000-1", "dead00')
    again = Workspace(ws_dir, backend=backend)
    assert list(batches.iterdir()) == []
    assert [i.name for i in again.list_branches()] == ["keeper"]
    again.open_branch(keeper.id).abort()


@pytest.mark.parametrize("backend", ["overlay"])
def test_a_view_mounted_ahead_shows_the_workspace_as_it_is_when_taken(
    ws_dir: Path, backend: str
) -> None:
    """Spares are mounted while the previous batch runs; whatever changes in the
    workspace before the next batch takes them (a commit, a third party) is what that
    batch sees, exactly as with views mounted on the spot; nested batches, whose layers
    differ, use plain spares."""
    ws = Workspace(ws_dir, backend=backend)
    first = ws.branch_many(["a", "b", "c"], on_success=None, on_error=None)
    made = _await_spares(ws, 3)
    (first[0].path / "sub" / "b.txt").write_text("committed\n")
    (first[0].path / "new.txt").write_text("new\n")
    first[0].commit()
    ws.abort_many(first[1:])
    (ws_dir / "a.txt").write_text("third party\n")
    (ws_dir / "later.txt").write_text("later\n")
    second = ws.branch_many(["x", "y", "z"], on_success=None, on_error=None)
    assert not set(made) & set(_spares(ws)), "the batch did not take the mounted spares"
    for kid in second:
        assert (kid.path / "sub" / "b.txt").read_text() == "committed\n"
        assert (kid.path / "a.txt").read_text() == "third party\n"
        assert sorted(p.name for p in kid.path.iterdir()) == [
            "a.txt",
            "later.txt",
            "new.txt",
            "sub",
        ]
    (second[0].path / "x.txt").write_text("x")
    assert not (second[1].path / "x.txt").exists() and not (ws_dir / "x.txt").exists()
    nested = second[2].branch_many(["n1", "n2"], on_success=None, on_error=None)
    (second[2].path / "only-z.txt").write_text("z")
    assert all((n.path / "only-z.txt").read_text() == "z" for n in nested)
    second[0].commit()
    assert (ws_dir / "x.txt").read_text() == "x"
    ws.abort_many(second[1:])
    ws.close()
    assert _mounted_in_helper(ws, spares=True) == []


@pytest.mark.parametrize("backend", ["overlay"])
def test_workspace_objects_on_one_store_share_its_spares(ws_dir: Path, backend: str) -> None:
    """Objects that come and go (one per command, say) do not pile spares up: the next
    object's batch takes what an earlier one left, and one close() clears them."""
    first = Workspace(ws_dir, backend=backend)
    kids = first.branch_many(["a", "b"], on_success=None, on_error=None)
    made = _await_spares(first, 2)
    assert len(made) == 2
    first.abort_many(kids)
    second = Workspace(ws_dir, backend=backend)
    kids = second.branch_many(["c", "d"], on_success=None, on_error=None)
    assert not set(made) & set(_spares(second))
    assert all((k.path / "a.txt").read_text() == "a\n" for k in kids)
    assert len(_await_spares(second, 2)) == 2
    second.abort_many(kids)
    first.close()
    assert _spares(second) == [] and _mounted_in_helper(second, spares=True) == []
