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
    dirs: list[Path] = field(default_factory=list)
    whiteouts: list[Path] = field(default_factory=list)
    files: dict[Path, str] = field(default_factory=dict)
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

        ``make_spares``: directories the helper makes once it has replied, so they cost
        this call nothing; every later request is answered after they exist (or failed,
        in which case a branch naming one as ``spare`` is made the ordinary way)."""
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
            still = [Path(str(p)) for p in failed] if isinstance(failed, list) else list(targets)
            raise UmountError(f"umount failed: {reply.get('error')}", still)

    def mount_read_only(self, lower: list[Path], target: Path) -> None:
        """A read-only merge of ``lower`` (top first), following directory redirects."""
        self._request(
            {"op": "mount", "lower": [str(p) for p in lower], "upper": None, "target": str(target)}
        )

    def umount(self, target: Path) -> None:
        self._request({"op": "umount", "target": str(target)})

    def sync(self) -> None:
        """Return once every earlier request is done, including spares made after a reply."""
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


_shared: MountHelper | None = None
_shared_lock = threading.Lock()


def shared_helper() -> MountHelper:
    """The process-wide helper, started on first use (and again after a fork)."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.alive:
            _shared = MountHelper()
        return _shared


def running_helper() -> MountHelper | None:
    """The process-wide helper if it is running in this process (never starts one)."""
    with _shared_lock:
        helper = _shared
    return helper if helper is not None and helper.alive else None


def sync_shared_helper() -> None:
    """``sync`` the process-wide helper if it is running (never starts one)."""
    helper = running_helper()
    if helper is not None:
        helper.sync()


def shutdown_shared_helper() -> None:
    """Stop the helper; every view it holds disappears with its namespace."""
    global _shared
    with _shared_lock:
        if _shared is not None and _shared.owner_pid == os.getpid():
            _shared.close()
        _shared = None
