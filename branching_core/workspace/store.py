"""The branch store: where branch layers, metadata, journals and locks live.

The store lives outside the workspace (the kernel refuses overlay lower layers nested
inside one another, so an ancestor's upper layer may not sit inside the workspace) but
on the same filesystem, so a commit can rename instead of copy. ``default_store_root``
picks it deterministically from the workspace path, so recovery always finds it::

    sessions/<sid>.lock      held (flock) by the live process that owns session <sid>,
                             which writes its pid there (see ``session_lock``)
    commit.lock              serialises commits and recovery across processes
    gen/<parent>             how many commits have gone into <parent> ("root" or a branch id)
    journal/<commit>.json    intent journal of a commit in progress
    trash/<sid>-<n>/         what a commit displaced, deleted once the commit is done
    spare/<sid>-<n>-s<i>/    an overlay branch directory made ahead, taken by rename
    batches/<sid>-<n>.json   durable branches being made together (gone once all exist)
    <sid>-<n>/               one branch: meta.json plus the backend's layers

A branch directory's name starts with its session id, so recovery can tell whether
the process that owns it is still alive without reading anything else.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branching_core.atomicio import atomic_write, is_atomic_temp
from branching_core.workspace.fsutil import (
    is_json_list,
    nearest_existing,
    read_json,
    rmtree,
    write_json_atomic,
)
from branching_core.workspace.session_lock import claim, held_by_live_owner

ROOT_ID = "root"
STORE_ENV = "FORKDECK_STORE"


def default_store_root(workspace_root: Path) -> Path:
    """Where the branch store of ``workspace_root`` lives.

    ``$FORKDECK_STORE/<key>`` when set; else the user's cache directory when it is on
    the workspace's filesystem; else a ``.forkdeck-stores`` directory beside the
    workspace. ``<key>`` is the workspace's name plus a hash of its absolute path.
    """
    digest = hashlib.sha256(str(workspace_root).encode()).hexdigest()[:12]
    key = f"{_safe_name(workspace_root.name or 'root')}-{digest}"
    legacy = f"{workspace_root.name or 'root'}-{digest}"
    explicit = os.environ.get(STORE_ENV)
    if explicit:
        return _prefer_existing(Path(explicit), key, legacy)
    device = os.stat(workspace_root).st_dev
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    candidates = [cache_home / "forkdeck" / "stores", workspace_root.parent / ".forkdeck-stores"]
    for base in candidates:
        if _usable_on_device(base, device):
            return _prefer_existing(base, key, legacy)
    return _prefer_existing(candidates[-1], key, legacy)


def _safe_name(name: str) -> str:
    """The workspace's name as it appears in store paths: letters, digits, ``._-`` only.

    Branch views live under the store, and their paths travel through mount options,
    ``/proc/<pid>/root/...`` parsing and line-based protocols: a newline, comma, colon
    or backslash taken from the workspace's name broke those (sandboxed writes that
    vanished, overlay silently dropped). The hash keeps keys unique.
    """
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64] or "root"


def _prefer_existing(base: Path, key: str, legacy: str) -> Path:
    """A store made before names were made safe keeps being used (its journals and
    durable branches must be found)."""
    if legacy != key and (base / legacy).is_dir() and not (base / key).exists():
        return base / legacy
    return base / key


def _usable_on_device(base: Path, device: int) -> bool:
    probe = nearest_existing(base)
    if probe is None:
        return False
    try:
        return os.stat(probe).st_dev == device and os.access(probe, os.W_OK | os.X_OK)
    except OSError:
        return False


@dataclass
class Session:
    """This process's claim on a store: a held flock that dies with the process."""

    sid: str
    fd: int
    pid: int
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))


_SESSIONS: dict[Path, Session] = {}
_SESSIONS_LOCK = threading.Lock()


def release_sessions() -> None:
    """Drop this process's session locks (interpreter exit)."""
    with _SESSIONS_LOCK:
        for root, session in list(_SESSIONS.items()):
            if session.pid == os.getpid():
                with contextlib.suppress(OSError):
                    (root / "sessions" / f"{session.sid}.lock").unlink()
                with contextlib.suppress(OSError):
                    os.close(session.fd)
        _SESSIONS.clear()


class Store:
    def __init__(self, workspace_root: Path, root: Path | None = None) -> None:
        self.workspace_root = workspace_root
        self.root = root or default_store_root(workspace_root)

    # -- layout -----------------------------------------------------------------
    def ensure(self) -> None:
        for sub in ("sessions", "gen", "journal", "trash"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        marker = self.root / "workspace"
        if not marker.exists():
            marker.write_text(f"{self.workspace_root}\n")

    def branch_dir(self, branch_id: str) -> Path:
        return self.root / branch_id

    @property
    def journal_dir(self) -> Path:
        return self.root / "journal"

    # -- sessions -----------------------------------------------------------------
    def session(self) -> Session:
        """One session per store and process, shared by every Workspace object on it."""
        with _SESSIONS_LOCK:
            session = _SESSIONS.get(self.root)
            if session is None or session.pid != os.getpid():
                session = self._open_session()
                _SESSIONS[self.root] = session
            return session

    def _open_session(self) -> Session:
        self.ensure()
        sid = secrets.token_hex(4)
        fd = os.open(
            self.root / "sessions" / f"{sid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644
        )
        fcntl.flock(fd, fcntl.LOCK_EX)
        claim(fd)  # who holds it: a child forked from this process shares the flock
        return Session(sid=sid, fd=fd, pid=os.getpid())

    def new_branch_id(self) -> str:
        session = self.session()
        return f"{session.sid}-{next(session.counter)}"

    def is_own_session(self, sid: str) -> bool:
        own = _SESSIONS.get(self.root)
        return own is not None and own.sid == sid and own.pid == os.getpid()

    def session_alive(self, sid: str) -> bool:
        """True while the process owning ``sid`` holds its lock (not only a child it
        forked and that has not exec'd yet: see ``session_lock``)."""
        own = _SESSIONS.get(self.root)
        if own is not None and own.sid == sid and own.pid == os.getpid():
            return True
        path = self.root / "sessions" / f"{sid}.lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            return held_by_live_owner(fd)
        finally:
            os.close(fd)

    def forget_dead_sessions(self) -> None:
        for lock in (self.root / "sessions").glob("*.lock"):
            if not self.session_alive(lock.stem):
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()

    # -- commit lock ----------------------------------------------------------------
    @contextlib.contextmanager
    def commit_lock(self) -> Generator[None, None, None]:
        self.ensure()
        fd = os.open(self.root / "commit.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # -- generations ------------------------------------------------------------------
    def generation(self, parent_id: str) -> int:
        try:
            return int((self.root / "gen" / parent_id).read_text() or 0)
        except FileNotFoundError:
            return 0

    def set_generation(self, parent_id: str, value: int) -> None:
        atomic_write(self.root / "gen" / parent_id, str(value).encode())

    def drop_generation(self, parent_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.root / "gen" / parent_id).unlink()

    # -- metadata -------------------------------------------------------------------
    def write_meta(self, branch_id: str, meta: dict[str, Any]) -> None:
        write_json_atomic(self.branch_dir(branch_id) / "meta.json", meta)

    def read_meta(self, branch_id: str) -> dict[str, Any] | None:
        try:
            meta: dict[str, Any] = read_json(self.branch_dir(branch_id) / "meta.json")
        except (FileNotFoundError, ValueError):
            return None
        return meta

    def branch_ids(self) -> list[str]:
        if not self.root.exists():
            return []
        ids: list[str] = []
        for entry in self.root.iterdir():
            if "-" in entry.name and entry.is_dir() and not entry.name.startswith("."):
                ids.append(entry.name)
        return sorted(ids)

    # -- disposal -------------------------------------------------------------------
    def trash_path(self) -> Path:
        return self.root / "trash" / self.new_branch_id()

    def remove_branch_dir(self, branch_id: str) -> None:
        rmtree(self.branch_dir(branch_id))
        self.drop_generation(branch_id)

    def sweep_trash(self, *, only_dead: bool = True) -> None:
        trash = self.root / "trash"
        if not trash.exists():
            return
        for entry in trash.iterdir():
            sid = entry.name.split("-", 1)[0]
            if only_dead and self.session_alive(sid):
                continue
            rmtree(entry)

    # -- durable batches ------------------------------------------------------------
    def begin_batch(self, branch_ids: list[str]) -> Path:
        """Record that ``branch_ids`` (durable) are being made together: if this process
        dies before :meth:`end_batch`, recovery removes every one of them, so a crash
        never leaves part of a batch (or a branch no caller ever got) to be reopened."""
        directory = self.root / "batches"
        directory.mkdir(exist_ok=True)
        marker = directory / f"{branch_ids[0]}.json"
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, json.dumps(branch_ids).encode())
        finally:
            os.close(fd)
        return marker

    def end_batch(self, marker: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            marker.unlink()

    def sweep_batches(self) -> None:
        """Remove the branches of durable batches whose maker died before finishing
        (the caller holds the commit lock). An unreadable marker was being written when
        its process died, before any of its branches existed."""
        directory = self.root / "batches"
        if not directory.exists():
            return
        for marker in directory.iterdir():
            if self.session_alive(marker.name.split("-", 1)[0]):
                continue
            try:
                ids: object = json.loads(marker.read_bytes())
            except (OSError, ValueError):
                ids = None
            for branch_id in ids if is_json_list(ids) else ():
                if isinstance(branch_id, str) and "/" not in branch_id and branch_id:
                    self.remove_branch_dir(branch_id)
            with contextlib.suppress(FileNotFoundError):
                marker.unlink()

    def sweep_spares(self) -> None:
        """Remove spare branch directories (made ahead by the overlay backend's mount
        helper, ``spare/<sid>-...``) whose session is gone."""
        spare = self.root / "spare"
        if not spare.exists():
            return
        for entry in spare.iterdir():
            if not self.session_alive(entry.name.split("-", 1)[0]):
                rmtree(entry)

    def sweep_generations(self) -> None:
        """Drop the generation files of branches that are gone: a process killed between
        throwing a branch away and forgetting its generation (``Branch._dispose_many``)
        left ``gen/<branch>`` for good. Only commit-lock holders write them, and the
        caller holds that lock."""
        directory = self.root / "gen"
        if not directory.exists():
            return
        for entry in directory.iterdir():
            name = entry.name
            if name == ROOT_ID or name.startswith(".") or self.branch_dir(name).exists():
                continue
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()

    def sweep_temp_files(self) -> None:
        """Drop half-written journal and generation files (a writer died before its
        rename). Only commit-lock holders write them, and the caller holds that lock."""
        for sub in ("journal", "gen"):
            directory = self.root / sub
            if not directory.exists():
                continue
            for entry in directory.iterdir():
                if is_atomic_temp(entry.name) or (
                    entry.name.startswith(".") and ".tmp" in entry.name  # older releases
                ):
                    with contextlib.suppress(FileNotFoundError):
                        entry.unlink()

    def set_aside(self, journal_path: Path, branch_id: str | None) -> Path:
        """Move a journal that cannot be replayed (and its branch's data) out of the way:
        ``failed/<journal name>-<unix time>/``. Returns where it went."""
        place = self.root / "failed" / f"{journal_path.stem}-{int(time.time())}"
        place.mkdir(parents=True, exist_ok=True)
        os.replace(journal_path, place / "journal.json")
        if branch_id is not None and self.branch_dir(branch_id).exists():
            with contextlib.suppress(OSError):
                os.replace(self.branch_dir(branch_id), place / "branch")
            self.drop_generation(branch_id)
        return place

    def is_empty(self) -> bool:
        """True when nothing but empty bookkeeping directories is left."""
        if not self.root.exists():
            return True
        for sub in ("journal", "trash"):
            if any((self.root / sub).iterdir()) if (self.root / sub).exists() else False:
                return False
        return not self.branch_ids()
