"""Client side of the mount helper (see ``_mount_helper_main.py`` for why it exists).

One helper serves every overlay workspace of a process. Views it mounts are reached
from this process, its threads and its children as ``/proc/<helper pid>/root/<target>``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from branching_core.errors import MountError
from branching_core.workspace.fsutil import is_json_list

_HELPER_SOURCE = (Path(__file__).with_name("_mount_helper_main.py")).read_text()


@dataclass
class PreparedMount:
    """One branch for :meth:`MountHelper.create_many`: what to make, then what to mount.

    ``dirs`` are created in order (the first must be new), ``whiteouts`` are made as
    overlay whiteouts, ``files`` (path -> text) are written under new names only."""

    lower: list[Path]
    upper: Path
    work: Path
    target: Path
    dirs: list[Path] = field(default_factory=list[Path])
    whiteouts: list[Path] = field(default_factory=list[Path])
    files: dict[Path, str] = field(default_factory=dict[Path, str])
    spare: Path | None = None  # a spare made earlier (``make_spares``): renamed, not made
    spare_mounted: bool = False  # ... with its view already mounted (nothing to mount)


@dataclass
class Spare:
    """A store directory the helper makes ahead, after replying (``root``, with these
    directories and whiteouts, relative to it), for a later batch to take by rename."""

    root: Path
    dirs: list[str]
    whiteouts: list[str]
    # mount its view ahead too (``upper``/``work``/``view`` under ``root``) on these layers
    lower: list[Path] | None = None
    redirect: bool = False


class UmountError(MountError):
    """Some targets of :meth:`MountHelper.umount_many` are still mounted (``failed``)."""

    def __init__(self, message: str, failed: list[Path]) -> None:
        super().__init__(message)
        self.failed = failed


class MountHelper:
    """A running helper process and the socket used to drive it."""

    def __init__(self) -> None:
        parent_sock, child_sock = socket.socketpair()
        python = sys.executable or "/usr/bin/python3"
        try:
            self._proc = subprocess.Popen(
                [python, "-I", "-S", "-c", _HELPER_SOURCE],
                stdin=child_sock.fileno(),
                stdout=child_sock.fileno(),
                stderr=subprocess.DEVNULL,
                close_fds=True,
                start_new_session=True,  # terminal signals must not kill our views
            )
        finally:
            child_sock.close()
        self._sock = parent_sock
        self._reader = parent_sock.makefile("rb")
        self._lock = threading.Lock()
        self.owner_pid = os.getpid()
        # requests sent so far (each is one round trip): batches must not pay one per branch
        self.round_trips = 0
        hello = self._read_reply()
        if not hello.get("ok"):
            self.close()
            raise MountError(f"cannot create a private mount namespace: {hello.get('error')}")
        pid = hello.get("pid")
        if not isinstance(pid, int):
            self.close()
            raise MountError(f"the mount helper sent no pid: {hello!r}")
        self.pid = pid
        self.root = Path(f"/proc/{self.pid}/root")

    def _read_reply(self) -> dict[str, object]:
        line = self._reader.readline()
        if not line:
            raise MountError("the mount helper exited unexpectedly")
        reply: dict[str, object] = json.loads(line)
        return reply

    def _request(self, payload: dict[str, object]) -> None:
        reply = self._exchange(payload)
        if not reply.get("ok"):
            raise MountError(f"{payload['op']} failed: {reply.get('error')}")

    def _exchange(self, payload: dict[str, object]) -> dict[str, object]:
        """Send one request and return the helper's reply (one round trip)."""
        with self._lock:
            self.round_trips += 1
            try:
                self._sock.sendall((json.dumps(payload) + "\n").encode())
                reply = self._read_reply()
            except OSError as exc:
                raise MountError(f"the mount helper is unreachable: {exc}") from exc
        return reply

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None and os.getpid() == self.owner_pid

    def mount_overlay(
        self, lower: list[Path], upper: Path, work: Path, target: Path, *, redirect: bool = False
    ) -> None:
        self.mount_overlays([(lower, upper, work, target)], redirect=redirect)

    def mount_overlays(
        self, mounts: list[tuple[list[Path], Path, Path, Path]], *, redirect: bool = False
    ) -> None:
        """Mount several overlays (lower, upper, work, target) in one round trip; all or
        none (the helper unmounts the ones it made when a later one fails).

        ``redirect``: the root-only on-disk format where directory renames work
        (trusted.overlay.* xattrs, ``redirect_dir=on``) instead of ``userxattr``.
        """
        self._request(
            {
                "op": "mount_many",
                "mounts": [
                    {
                        "lower": [str(p) for p in lower],
                        "upper": str(upper),
                        "work": str(work),
                        "target": str(target),
                        "redirect": redirect,
                    }
                    for lower, upper, work, target in mounts
                ],
            }
        )

    def create_many(
        self,
        branches: list[PreparedMount],
        *,
        redirect: bool = False,
        make_spares: list[Spare] | None = None,
    ) -> None:
        """Make every branch's directories, whiteouts and files, and mount its overlay,
        in one round trip; all mounted or none (the caller removes what was made).

        ``make_spares``: directories the helper makes once it has replied, whenever no
        request is waiting, so they cost this call nothing; work paused for a request is
        resumed after it (``sync`` drops those not made yet). A branch naming one not
        made yet as ``spare`` is made the ordinary way, and that spare is never made."""
        self._request(
            {
                "op": "create_many",
                "redirect": redirect,
                "make_spares": [
                    {
                        "root": str(one.root),
                        "dirs": one.dirs,
                        "whiteouts": one.whiteouts,
                        "mount": None
                        if one.lower is None
                        else {"lower": [str(p) for p in one.lower], "redirect": one.redirect},
                    }
                    for one in make_spares or []
                ],
                "branches": [
                    {
                        "dirs": [str(p) for p in one.dirs],
                        "whiteouts": [str(p) for p in one.whiteouts],
                        "files": {str(p): text for p, text in one.files.items()},
                        "lower": [str(p) for p in one.lower],
                        "upper": str(one.upper),
                        "work": str(one.work),
                        "target": str(one.target),
                        "spare": str(one.spare) if one.spare is not None else None,
                        "spare_mounted": one.spare_mounted,
                    }
                    for one in branches
                ],
            }
        )

    def umount_many(self, targets: list[Path]) -> None:
        """Unmount several targets in one round trip. Every target is tried; raises
        ``UmountError`` listing those still mounted when any fails."""
        if not targets:
            return
        try:
            reply = self._exchange({"op": "umount_many", "targets": [str(p) for p in targets]})
        except MountError as exc:
            raise UmountError(str(exc), list(targets)) from exc
        if not reply.get("ok"):
            failed = reply.get("failed")
            still = [Path(str(p)) for p in failed] if is_json_list(failed) else list(targets)
            raise UmountError(f"umount failed: {reply.get('error')}", still)

    def mount_read_only(self, lower: list[Path], target: Path) -> None:
        """A read-only merge of ``lower`` (top first), following directory redirects."""
        self._request(
            {"op": "mount", "lower": [str(p) for p in lower], "upper": None, "target": str(target)}
        )

    def umount(self, target: Path) -> None:
        self._request({"op": "umount", "target": str(target)})

    def sync(self) -> None:
        """Return once every earlier request is done; spares not made yet are dropped,
        so none is made after this returns (``SparePool.close`` then discards the rest)."""
        self._request({"op": "ping"})

    def view_path(self, target: Path) -> Path:
        """Where ``target`` (a path inside the helper's namespace) is reached from outside."""
        return Path(f"{self.root}{target}")

    def close(self) -> None:
        try:
            self._sock.close()
            self._reader.close()
        finally:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


_shared: MountHelper | None = None  # the newest helper: new workspaces go to it
_older: list[MountHelper] = []  # helpers still holding views of earlier workspaces
_pinned: dict[Path, MountHelper] = {}  # store root -> the helper holding its views
_shared_lock = threading.Lock()


def _sees(helper: MountHelper, paths: tuple[Path, ...]) -> bool:
    """Whether ``helper``'s mount namespace shows each of ``paths`` as this process does.

    The helper's namespace is a private copy made when it started: a filesystem mounted
    on the host since then is not in it (the helper sees the directory underneath), so
    a workspace on it would be mounted from the wrong files or not at all."""
    for path in paths:
        while not os.path.lexists(path) and path.parent != path:
            path = path.parent  # not made yet (a store root): where it will be made
        try:
            here, there = os.stat(path), os.stat(f"{helper.root}{path}")
        except OSError:
            return False
        if (here.st_dev, here.st_ino) != (there.st_dev, there.st_ino):
            return False
    return True


def shared_helper(*paths: Path) -> MountHelper:
    """The process-wide helper, started on first use (and again after a fork).

    ``paths`` (absolute) must look the same inside its namespace as here; when a
    filesystem was mounted under one of them after the helper started, a fresh helper
    (a fresh copy of the host's mounts) becomes the shared one. The older one keeps
    serving the views it holds until ``shutdown_shared_helper``."""
    global _shared
    with _shared_lock:
        if _shared is not None and not _shared.alive:
            _shared = None
        if _shared is not None and paths and not _sees(_shared, paths):
            _older.append(_shared)
            _shared = None
        if _shared is None:
            _older[:] = [one for one in _older if one.alive]
            _shared = MountHelper()
        return _shared


def pin_helper(store_root: Path, helper: MountHelper) -> None:
    """Record that the views under ``store_root`` are mounted by ``helper``."""
    with _shared_lock:
        _pinned[store_root] = helper


def helper_for(store_root: Path) -> MountHelper:
    """The helper serving ``store_root``'s views (the shared one if none is pinned, or
    the pinned one is gone: after a fork, or once it was shut down)."""
    with _shared_lock:
        pinned = _pinned.get(store_root)
    if pinned is not None and pinned.alive:
        return pinned
    helper = shared_helper(store_root)
    pin_helper(store_root, helper)
    return helper


def running_helper(store_root: Path | None = None) -> MountHelper | None:
    """The helper serving ``store_root`` (else the shared one) if it is running in this
    process (never starts one)."""
    with _shared_lock:
        helper = _pinned.get(store_root) if store_root is not None else None
        if helper is None:
            helper = _shared
    return helper if helper is not None and helper.alive else None


def sync_shared_helper() -> None:
    """``sync`` every helper of this process that is running (never starts one)."""
    with _shared_lock:
        helpers = [*_older, *([_shared] if _shared is not None else [])]
    for helper in helpers:
        if helper.alive:
            helper.sync()


def shutdown_shared_helper() -> None:
    """Stop the helpers; every view they hold disappears with their namespaces."""
    global _shared
    with _shared_lock:
        helpers = [*_older, *([_shared] if _shared is not None else [])]
        _shared = None
        _older.clear()
        _pinned.clear()
    for helper in helpers:
        if helper.owner_pid == os.getpid():
            helper.close()
