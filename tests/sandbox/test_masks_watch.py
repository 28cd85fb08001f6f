"""The cached secret masks are proven unchanged by an inotify watch (``fswatch``) on the
directories they rest on and a poll of the mount table, not by an lstat of every path
on each sandbox start (issue 29). Whatever the watch reports sends the cache back to
the lstat proof; a fork child never reads its parent's events; a mount is a change.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.sandbox import masks
from branching_core.sandbox.fswatch import DirWatch, Unwatchable

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A HOME of its own (outside /tmp), and masks cached even right after a change."""
    base = Path(f"/var/tmp/forkdeck-watch-{secrets.token_hex(4)}")
    (base / "home" / "project").mkdir(parents=True)
    (base / "home" / "notes.txt").write_text("")
    monkeypatch.setenv("HOME", str(base / "home"))
    monkeypatch.setattr(masks, "_RACY_NS", -10**18)
    masks._masks_cache.clear()
    yield base / "home"
    masks._masks_cache.clear()
    shutil.rmtree(base, ignore_errors=True)


def _cached() -> masks._CachedMasks:
    masks.secret_masks()
    found = list(masks._masks_cache.values())
    if not found:
        pytest.skip("the secret masks are not cached on this host (a symlinked home?)")
    if found[0].watch is None:
        pytest.skip("the directories the masks rest on cannot be watched here")
    return found[0]


def test_a_quiet_watch_proves_the_cached_masks(home: Path) -> None:
    cached = _cached()
    assert cached.watch is not None and cached.watch.quiet()
    assert masks.secret_masks() is cached.masks


def test_an_event_sends_the_cache_back_to_the_lstat_proof(home: Path) -> None:
    """A change that does not touch what the masks rest on (a write to a file in the
    home): the watch reports it, the lstat proof still holds, and the watch is quiet
    again. A credential file appearing: the proof fails and the masks are planned anew."""
    cached = _cached()
    assert cached.watch is not None
    (home / "notes.txt").write_text("x")  # an existing file: its directory is unchanged
    assert not cached.watch.quiet()
    assert masks.secret_masks() is cached.masks  # proven by lstat: nothing it rests on moved
    assert cached.watch.quiet()
    (home / ".netrc").write_text("machine x password hunter2\n")
    fresh = masks.secret_masks()
    assert fresh is not cached.masks
    assert str(home / ".netrc") in fresh.credentials


def test_a_fork_child_never_reads_its_parents_events(home: Path) -> None:
    """The child shares the inotify file description: had it kept the parent's cache, its
    check would consume the event announcing the new credential file, and the parent
    would go on masking the old set."""
    cached = _cached()
    assert cached.watch is not None
    (home / ".netrc").write_text("machine x password hunter2\n")  # an event, unread
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            masks.secret_masks()  # must not touch the parent's watch
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert str(home / ".netrc") in masks.secret_masks().credentials


MOUNTED = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0x00020000) == 0  # a mount namespace of this process's own
assert libc.mount(None, b"/", None, (1 << 14) | (1 << 18), None) == 0  # private
from branching_core.sandbox import masks
masks._RACY_NS = -10**18
masks.secret_masks()
(cached,) = masks._masks_cache.values()
assert cached.watch is not None and cached.watch.quiet() and cached.still_valid()
target = sys.argv[1].encode()
assert libc.mount(b"tmpfs", target, b"tmpfs", 0, None) == 0, ctypes.get_errno()
print(cached.watch.quiet(), cached.still_valid())
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")
def test_a_mount_over_a_path_the_masks_rest_on_is_a_change(home: Path) -> None:
    """A mount makes no inotify event: the mount table's poll is what reports it (and the
    lstat proof then sees the new device)."""
    (home / ".aws").mkdir()  # a credential directory: its own mask, one of the deps
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(home)}
    proc = subprocess.run([sys.executable, "-c", MOUNTED, str(home / ".aws")], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


def test_only_local_filesystems_are_watched(tmp_path: Path) -> None:
    """/proc reports no change to inotify: a watch there is refused, never trusted."""
    watch = DirWatch([str(tmp_path)])
    try:
        assert watch.quiet()
        (tmp_path / "new").write_text("x")
        assert not watch.quiet()
        watch.drain()
        assert watch.quiet()
    finally:
        watch.close()
    with pytest.raises(Unwatchable):
        DirWatch(["/proc/self"])
