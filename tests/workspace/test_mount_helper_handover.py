"""The mount helper's "unmount this view and hand over the next one" (issue 29, Ray row).

A Ray task (one branch, then its abort, again and again) paid two helper round trips
per branch: mount, then unmount, each a wake-up of another process, and on a Ray
worker (which runs at nice 15, and so does the helper it starts) each cost 2-6 ms on a
loaded machine. Now the abort's unmount request also asks for the next view
(``defer_spares``: mounted by the helper after it replied), and the next top-level
branch takes that mounted view with one ``rename`` of its own: one round trip per
branch, none of it a mount.

Also here: the helper program runs as ``python -I -S`` and may import only the standard
library; a spare made by another helper (one killed meanwhile) is never handed out as
mounted.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from branching_core import Workspace
from branching_core.errors import MountError
from branching_core.workspace import mount_helper, reaper
from branching_core.workspace.backends.spares import SPARE_DIRS, WHITEOUT
from branching_core.workspace.mount_helper import MountHelper, Spare

HELPER_MAIN = Path(mount_helper.__file__).with_name("_mount_helper_main.py")


def _top_modules(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, "a relative import in the helper"
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            pytest.fail("the helper imports by __import__, which this test cannot check")
    return names


def test_the_helper_program_imports_only_the_standard_library() -> None:
    """Its source, statically (every import statement, the type-checking ones too)..."""
    names = _top_modules(HELPER_MAIN.read_text())
    assert {"ctypes", "json", "os"} <= names
    assert sorted(n for n in names if n not in sys.stdlib_module_names) == []


def test_the_helper_program_loads_nothing_outside_the_standard_library() -> None:
    """... and what it really loads, run as the engine runs it (``-I -S``), then told
    to stop (EOF on its socket): no module from site-packages or this repository."""
    ran = subprocess.run(
        [sys.executable, "-I", "-S", "-X", "importtime", "-c", HELPER_MAIN.read_text()],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.stdout.startswith('{"ok": '), (ran.stdout, ran.stderr[-2000:])
    loaded = {
        line.split("|")[-1].strip().split(".")[0]
        for line in ran.stderr.splitlines()
        if line.startswith("import time:") and "imported package" not in line
    }
    assert "json" in loaded and "ctypes" in loaded
    assert sorted(n for n in loaded if n not in sys.stdlib_module_names) == []


def _mounts(helper: MountHelper, under: Path) -> list[str]:
    lines = Path(f"/proc/{helper.pid}/mounts").read_text().splitlines()
    return sorted(line.split()[1] for line in lines if line.split()[1].startswith(f"{under}/"))


def _await(check: Callable[[], bool], what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {within} s: {what}")
        time.sleep(0.005)


def _idle(helper: MountHelper) -> bool:
    """Is the helper blocked reading its socket (every queued spare done or dropped)?"""
    try:
        wchan = Path(f"/proc/{helper.pid}/wchan").read_text().strip()
    except OSError:
        wchan = ""
    if wchan in ("", "0"):  # not shown by this kernel: give it time instead
        time.sleep(1.0)
        return True
    return wchan == "unix_stream_read_generic"


@pytest.fixture
def helper() -> Iterator[MountHelper]:
    try:
        one = MountHelper()
    except MountError as exc:
        pytest.skip(f"no mount namespace here: {exc}")
    yield one
    one.close()


def _view(root: Path, helper: MountHelper, lower: Path) -> Path:
    for name in ("upper", "work", "view"):
        (root / name).mkdir(parents=True)
    helper.mount_overlay([lower], root / "upper", root / "work", root / "view")
    return root / "view"


def _spare(root: Path, lower: Path) -> Spare:
    return Spare(root, list(SPARE_DIRS), [WHITEOUT], lower=[lower])


def test_one_request_unmounts_the_view_and_the_next_one_is_mounted_after_it(
    tmp_path: Path, helper: MountHelper
) -> None:
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "a.txt").write_text("a\n")
    view = _view(tmp_path / "b1", helper, lower)
    spare = _spare(tmp_path / "spare" / "s1", lower)
    trips = helper.round_trips
    helper.defer_spares([spare])
    assert helper.round_trips == trips  # nothing sent: it goes with the next request
    helper.umount_many([view])
    assert helper.round_trips == trips + 1
    assert str(view) not in _mounts(helper, tmp_path)  # unmounted before the reply
    _await(lambda: spare.root.exists(), "the next view, mounted after the reply")
    assert _mounts(helper, tmp_path) == [f"{spare.root}/view"]
    assert (helper.view_path(spare.root / "view") / "a.txt").read_text() == "a\n"
    assert os.major((spare.root / "upper" / ".pydantic-deep").lstat().st_rdev) == 0
    helper.sync()
    helper.umount_many([spare.root / "view"])
    assert _mounts(helper, tmp_path) == []


def test_unmount_done_next_mount_failed_leaves_nothing_and_the_next_branch_says_why(
    tmp_path: Path, helper: MountHelper
) -> None:
    """The unmount succeeds and is what the request answers; the next view cannot be
    mounted (its lower layer is gone): no spare, no ``.part``, no mount is left, and the
    branch that would have taken it, made the ordinary way, fails with a clear error."""
    lower = tmp_path / "lower"
    lower.mkdir()
    view = _view(tmp_path / "b1", helper, lower)
    missing = tmp_path / "gone"
    spare = _spare(tmp_path / "spare" / "s1", missing)
    helper.defer_spares([spare])
    helper.umount_many([view])  # no error: the unmount it answers for was done
    assert _mounts(helper, tmp_path) == []
    _await(lambda: _idle(helper), "the helper idle again")
    assert not spare.root.exists() and not Path(f"{spare.root}.part").exists()
    assert _mounts(helper, tmp_path) == []
    store_dir = tmp_path / "b2"
    branch = mount_helper.PreparedMount(
        lower=[missing],
        upper=store_dir / "upper",
        work=store_dir / "work",
        target=store_dir / "view",
        dirs=[store_dir, store_dir / "upper", store_dir / "work", store_dir / "view"],
        spare=spare.root,
        spare_mounted=True,
    )
    with pytest.raises(MountError, match=r"create_many failed: .*mount overlay: No such file"):
        helper.create_many([branch])
    assert _mounts(helper, tmp_path) == []


def _ws_mounts(ws: Workspace) -> list[str]:
    helper = mount_helper.helper_for(ws.tree.store.root)
    return _mounts(helper, ws.tree.store.root)


def _spare_views(ws: Workspace) -> int:
    """Spare views mounted and in place (a spare is built under ``.part``, then renamed)."""
    spares = f"{ws.tree.store.root}/spare/"
    points = _ws_mounts(ws)
    return len([p for p in points if p.startswith(spares) and ".part/" not in p])


@pytest.mark.parametrize("backend", ["overlay"])
def test_a_single_branch_takes_the_view_its_predecessors_abort_asked_for(
    ws_dir: Path, backend: str
) -> None:
    """A Ray task's pattern: one branch, its abort, again. After the first, each branch
    costs no helper request (a rename of the mounted view) and each abort one."""
    ws = Workspace(ws_dir, backend=backend)
    store = ws.tree.store.root
    first = ws.branch("k0", on_success=None, on_error=None)
    helper = mount_helper.helper_for(store)
    first.abort()
    for i in range(1, 6):
        _await(lambda: _spare_views(ws) == 1, "the next view mounted ahead")
        [ahead] = _ws_mounts(ws)
        assert ahead.startswith(f"{store}/spare/")
        trips = helper.round_trips
        kid = ws.branch(f"k{i}", on_success=None, on_error=None)
        assert helper.round_trips == trips, "the branch asked the helper"
        assert _ws_mounts(ws) == [f"{store}/{kid.id}/view"]
        assert sorted(p.name for p in kid.path.iterdir()) == ["a.txt", "sub"]
        (kid.path / "x.txt").write_text(str(i))
        kid.abort()
        assert helper.round_trips == trips + 1
        assert f"{store}/{kid.id}/view" not in _ws_mounts(ws)  # unmounted at once
        assert not (ws_dir / "x.txt").exists()
    kid = ws.branch("last", on_success=None, on_error=None)
    (kid.path / "y.txt").write_text("y")
    kid.commit()  # a branch from a spare commits like any other
    assert (ws_dir / "y.txt").read_text() == "y"
    ws.close()
    assert _ws_mounts(ws) == []
    assert reaper.drain(30)
    assert ws.tree.store.branch_ids() == []


@pytest.mark.parametrize("backend", ["overlay"])
def test_a_next_view_that_cannot_be_made_leaves_nothing_and_costs_only_its_spare(
    ws_dir: Path, backend: str
) -> None:
    """Through the workspace: the abort's unmount succeeds, the next view cannot be made
    (a file squats the spare directory), so the next branch is made on the spot, as
    before; no mount, ``.part`` or store directory is left."""
    ws = Workspace(ws_dir, backend=backend)
    store = ws.tree.store.root
    ws.branch("k0", on_success=None, on_error=None).abort()
    _await(lambda: _spare_views(ws) == 1, "the next view mounted ahead")
    helper = mount_helper.helper_for(store)
    trips = helper.round_trips
    kid = ws.branch("k1", on_success=None, on_error=None)  # takes it: no request
    assert helper.round_trips == trips
    (store / "spare").rmdir()  # (empty now)
    (store / "spare").write_text("in the way")
    kid.abort()  # unmounts kid's view; the next one cannot be made
    assert helper.round_trips == trips + 1
    assert _ws_mounts(ws) == []
    _await(lambda: _idle(helper), "the helper idle again")
    assert _ws_mounts(ws) == [] and (store / "spare").read_text() == "in the way"
    again = ws.branch("k2", on_success=None, on_error=None)
    assert (again.path / "a.txt").read_text() == "a\n"
    assert _ws_mounts(ws) == [f"{store}/{again.id}/view"]
    again.abort()
    (store / "spare").unlink()
    ws.close()
    assert _ws_mounts(ws) == []
    assert reaper.drain(30)
    assert ws.tree.store.branch_ids() == []


@pytest.mark.parametrize("backend", ["overlay"])
@pytest.mark.parametrize("batch", [1, 3])
def test_spares_of_a_killed_helper_are_never_handed_out_as_mounted(
    ws_dir: Path, backend: str, batch: int
) -> None:
    """The helper is SIGKILLed while spares it mounted are listed: its views died with
    it. The next branches (from a fresh helper) must show the workspace, not the empty
    directories the dead views left."""
    ws = Workspace(ws_dir, backend=backend)
    store = ws.tree.store.root
    kids = ws.branch_many([f"a{i}" for i in range(batch)], on_success=None, on_error=None)
    ws.abort_many(kids)
    old = mount_helper.helper_for(store)
    _await(lambda: len(_mounts(old, store)) == batch, "the spares mounted ahead")
    os.kill(old.pid, signal.SIGKILL)
    _await(lambda: not old.alive, "the helper gone")
    fresh = ws.branch_many([f"b{i}" for i in range(batch)], on_success=None, on_error=None)
    for kid in fresh:
        assert (kid.path / "a.txt").read_text() == "a\n"
        (kid.path / "z.txt").write_text(kid.name)
    fresh[0].commit()
    assert (ws_dir / "z.txt").read_text() == "b0"
    ws.abort_many([k for k in fresh if k.is_open])
    ws.close()
    assert _ws_mounts(ws) == []
    assert reaper.drain(30)
    assert ws.tree.store.branch_ids() == []


def test_a_small_discarded_tree_is_removed_without_a_child_process(tmp_path: Path) -> None:
    """An aborted overlay branch's store directory holds a handful of entries (a Ray
    task's: once per task): removing it here costs a few syscalls, where ``setpriv`` +
    ``rm`` cost two execs (~2 ms of CPU per task, measured). A big tree still goes to
    ``rm`` (the GIL is not held per entry for it)."""
    from branching_core.workspace import treescan

    small = tmp_path / "small"
    (small / "upper" / "d").mkdir(parents=True)
    (small / "work" / "work").mkdir(parents=True)
    (small / "upper" / "d" / "f.txt").write_text("x")
    os.symlink("/nonexistent", small / "upper" / "link")
    os.mkfifo(small / "upper" / "fifo")
    big = tmp_path / "big"
    big.mkdir()
    for i in range(treescan.SMALL_TREE + 5):
        (big / f"f{i}").write_text("")
    spawned: list[str] = []

    def audit(event: str, args: tuple[object, ...]) -> None:
        if event == "subprocess.Popen":
            spawned.append(str(args[1]))

    sys.addaudithook(audit)
    treescan.remove_trees([small])
    assert not small.exists() and spawned == []
    treescan.remove_trees([big])
    assert not big.exists() and any("rm" in cmd for cmd in spawned)
