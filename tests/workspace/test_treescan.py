"""The copy backend lists and removes a view out of process (workspace.treescan).

Why: a commit's per-entry syscalls, done in the committing thread, starved the fork
coordinator's event loop of the GIL on a loaded machine (issue 12 item 10). These tests
pin what the child-process listing must equal (what ``os.lstat`` says, for every kind of
entry and name) and that a copy-backend diff and dispose no longer do per-entry work in
this process.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from branching_core.workspace import Workspace
from branching_core.workspace.fsutil import PROJECT_STATE_DIR
from branching_core.workspace.treescan import (
    _find_works,
    kind_of,
    list_tree,
    parse_records,
    record_of,
    remove_tree,
)

ODD_NAMES = ["plain.txt", "with space", "new\nline", "-dash", "star*?[x]", "tab\tname", "ü.txt"]


def _odd_tree(root: Path) -> None:
    root.mkdir(parents=True)
    for name in ODD_NAMES:
        (root / name).write_text(name)
    raw = os.fsencode(root) + b"/bad-\xff-bytes"
    with open(raw, "wb") as fh:
        fh.write(b"x")
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "deep.txt").write_text("deep")
    (root / "d" / PROJECT_STATE_DIR).mkdir()  # kept: only the top-level one is the engine's
    (root / "d" / PROJECT_STATE_DIR / "kept").write_text("k")
    (root / PROJECT_STATE_DIR).mkdir()  # skipped
    (root / PROJECT_STATE_DIR / "skipped").write_text("s")
    os.symlink("plain.txt", root / "link")
    os.symlink("nowhere", root / "broken")
    os.mkfifo(root / "fifo")
    (root / "setuid").write_text("s")
    os.chmod(root / "setuid", 0o4755)
    (root / "sticky").mkdir()
    os.chmod(root / "sticky", 0o1777)
    (root / "old").write_text("old")
    os.utime(root / "old", ns=(0, -315_619_199_500_000_000))  # 1960, half a second in
    (root / "future").write_text("future")
    os.utime(root / "future", ns=(0, 4_102_444_800_123_456_789))


def _lstat_all(root: Path) -> dict[str, tuple[str, int, int, int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != PROJECT_STATE_DIR]
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            out[rel] = (
                kind_of(st.st_mode),
                stat.S_IMODE(st.st_mode),
                st.st_size,
                st.st_mtime_ns,
                st.st_ino,
            )
    return out


def test_listing_is_what_lstat_says_for_every_kind_of_entry_and_name(tmp_path: Path) -> None:
    if not _find_works():
        pytest.skip("no GNU find here: the in-process listing is the only one (tested below)")
    root = tmp_path / "root with [glob] * chars" / "-tree"
    _odd_tree(root)
    expected = _lstat_all(root)
    external = list_tree(root)
    in_process = list_tree(root, external=False)
    assert external == in_process
    assert parse_records(external) == expected
    # a record rebuilt from its parsed form is the same record (a reopened branch's
    # listing is rebuilt from its manifest); only a fifo's type letter is not kept
    rebuilt = {record_of(rel, entry) for rel, entry in expected.items()}
    assert external - rebuilt == {r for r in external if r.startswith(b"p ")}
    assert "d/.pydantic-deep/kept" in expected and ".pydantic-deep" not in expected


def test_in_process_listing_is_what_lstat_says(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    _odd_tree(root)
    assert parse_records(list_tree(root, external=False)) == _lstat_all(root)


def test_an_unreadable_tree_raises_the_in_process_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list_tree(tmp_path / "missing")


def test_remove_tree_removes_everything_including_mode_000_directories(tmp_path: Path) -> None:
    root = tmp_path / "gone"
    _odd_tree(root)
    (root / "locked" / "inner").mkdir(parents=True)
    (root / "locked" / "inner" / "f").write_text("f")
    os.chmod(root / "locked" / "inner", 0)
    os.chmod(root / "locked", 0)
    remove_tree(root)
    assert not os.path.lexists(root)
    remove_tree(root)  # absent: nothing to do, no error


@contextmanager
def _count_calls(names: set[str]) -> Iterator[Counter[str]]:
    """Count the C functions of ``names`` this thread calls (``sys.setprofile``)."""
    counts: Counter[str] = Counter()

    def profile(frame: object, event: str, arg: object) -> None:
        if event == "c_call":
            name = getattr(arg, "__name__", "")
            if name in names:
                counts[name] += 1

    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)


PER_ENTRY_CALLS = {"lstat", "stat", "scandir", "unlink", "rmdir", "listdir"}


def _copy_workspace(tmp_path: Path, files: int) -> Workspace:
    root = tmp_path / "ws"
    for i in range(files):
        d = root / f"d{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.txt").write_text(f"{i}\n")
    return Workspace(root, backend="copy")


def test_copy_backend_diff_and_dispose_do_no_per_entry_work_in_process(tmp_path: Path) -> None:
    """Before: ``changes()`` stat-ed all 2,000 entries of the view in this thread and
    ``commit()`` did it again and then unlinked them one by one (4,000+ calls, each a
    GIL release and re-take). Now both are a child process's work: what is left here
    grows with the changes (3 files), not with the tree."""
    if not _find_works() or shutil.which("rm") is None:
        pytest.skip("no GNU find/rm here: the copy backend lists and removes in process")
    ws = _copy_workspace(tmp_path, 2000)
    branch = ws.branch("b", on_success=None)
    (branch.path / "d000" / "f00001.txt").write_text("changed\n")
    (branch.path / "d019" / "new.txt").write_text("new\n")
    (branch.path / "d005" / "f00500.txt").unlink()
    with _count_calls(PER_ENTRY_CALLS) as counts:
        changes = branch.changes()
        branch.commit()
    assert changes.modified == ["d000/f00001.txt"]
    assert changes.created == ["d019/new.txt"]
    assert changes.deleted == ["d005/f00500.txt"]
    assert (ws.path / "d000" / "f00001.txt").read_text() == "changed\n"
    assert not (ws.path / "d005" / "f00500.txt").exists()
    assert sum(counts.values()) < 200, counts


def _fifo_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("b\n")
    os.symlink("b.txt", root / "sub" / "link")
    return root


def test_reopened_copy_branch_diffs_from_its_manifest(tmp_path: Path) -> None:
    """A reopened durable branch has no listing from its creation: the one its manifest
    describes gives the same changes."""
    root = _fifo_workspace(tmp_path)
    branch = Workspace(root, backend="copy").branch("keep", on_success=None, durable=True)
    branch_id = branch.id
    (branch.path / "sub" / "b.txt").write_text("changed\n")
    os.chmod(branch.path / "sub", 0o700)
    (branch.path / "a.txt").unlink()
    reopened = Workspace(root, backend="copy").open_branch(branch_id)
    changes = reopened.changes()
    assert changes.modified == ["sub", "sub/b.txt"]
    assert changes.deleted == ["a.txt"]
    assert changes.created == []
    reopened.commit()
    assert (root / "sub" / "b.txt").read_text() == "changed\n"
    assert stat.S_IMODE(os.stat(root / "sub").st_mode) == 0o700
    assert not (root / "a.txt").exists()
    assert os.readlink(root / "sub" / "link") == "b.txt"


def test_copy_backend_sees_a_same_size_rewrite_that_kept_every_stat_field(
    tmp_path: Path,
) -> None:
    """A file written just before the branch was made is hashed at creation: a rewrite
    that keeps size, inode and mtime (one timestamp tick) lists exactly as before, and only
    the hash can tell. Also: an untouched hashed file is no change, and a deleted one is a
    deletion (not a hash of a missing file)."""
    root = tmp_path / "ws"
    root.mkdir()
    for name in ("x.txt", "same.txt", "gone.txt"):
        (root / name).write_text("aaaa\n")
    ws = Workspace(root, backend="copy")
    branch = ws.branch("b", on_success=None)
    target = branch.path / "x.txt"
    st = os.lstat(target)
    with open(target, "r+b") as fh:  # same inode, same size
        fh.write(b"bbbb\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = os.lstat(target)
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    (branch.path / "gone.txt").unlink()
    changes = branch.changes()
    assert changes.modified == ["x.txt"]
    assert changes.deleted == ["gone.txt"]
    assert changes.created == []
