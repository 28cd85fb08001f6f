"""Checkpoint anchors ``fork:<id>`` and ``post-fork:<id>``, with files.

``fork:<id>`` is saved when the fork is created (the parent's history at the fork point);
``post-fork:<id>`` when it is merged (the winner's merged history). Unlike seed 003,
rewinding restores **files** too. How, and why it is exact:

* Just before the winner is committed, every path the merge is about to change (the
  winner's created, modified and deleted paths) is recorded from the parent into
  ``checkpoints/fork/``: its bytes, or that it was a directory, a symlink or absent. The
  bytes are not copied then: each file is held open across the commit (which replaces
  paths by rename, so the descriptor keeps reading the old bytes) and copied afterwards
  in a worker thread (:meth:`CheckpointStore.hold_files`), so a merge never waits on, nor
  blocks the event loop with, a copy. Right after the merge, the same paths are recorded
  into ``checkpoints/post-fork/`` (also in a worker thread).
* A path the merge applies was, by the workspace's commit rule, *not* changed in the
  parent since the branch was created (otherwise it is a conflict and is not applied), so
  its pre-merge content *is* its pre-fork content. Restoring the recorded paths therefore
  returns the parent to its pre-fork state as far as the fork is concerned; changes other
  people made to other paths meanwhile are left alone.
* Before a merge, a fork has not changed the parent at all, so rewinding to ``fork:<id>``
  restores only the history.

Layout: ``.pydantic-deep/forks/<fork_id>/checkpoints/<fork|post-fork>/{checkpoint.json,
index.json, files/...}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branching_core.errors import (
    InvalidArgumentError,
    InvalidStateError,
    NotFoundError,
    UnsafeChangeError,
)
from branching_core.fork.history import load_history
from branching_core.fork.store import ForkStore, _atomic_write
from branching_core.workspace import beneath
from branching_core.workspace.guard import refuse
from branching_core.workspace.paths import path_problem

KINDS = ("fork", "post-fork")


@dataclass
class Checkpoint:
    """One saved anchor."""

    id: str
    """``fork:<fork_id>`` or ``post-fork:<fork_id>``."""
    fork_id: str
    kind: str
    created_at: float
    has_files: bool
    parent_workspace_branch_id: str | None


def parse_checkpoint_id(checkpoint_id: str) -> tuple[str, str]:
    kind, sep, fork_id = checkpoint_id.partition(":")
    if not sep or kind not in KINDS or not fork_id:
        raise InvalidArgumentError(
            f"not a fork checkpoint id: {checkpoint_id!r} (want fork:<id> or post-fork:<id>)"
        )
    return kind, fork_id


PENDING = "pending"
PRUNED = "pruned"
"""Marker: the file copies were dropped by the retention policy (fork/retention.py)."""
MAX_HELD = 256
"""At most this many pre-merge files are held open per merge (the rest are copied)."""


def _copy_into(src: Path, dst: Path, mode: int) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    os.chmod(dst, mode & 0o7777)


def _copy_fd(fd: int, dst: Path, mode: int) -> None:
    """Copy what ``fd`` reads (from offset 0) into a new file ``dst``."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        offset = 0
        size = os.fstat(fd).st_size
        try:
            while offset < size:
                sent = os.sendfile(out, fd, offset, min(size - offset, 1 << 30))
                if sent == 0:
                    break
                offset += sent
        except OSError:  # a filesystem without sendfile between files: plain reads
            os.lseek(out, offset, os.SEEK_SET)
            while chunk := os.pread(fd, 1 << 20, offset):
                os.write(out, chunk)
                offset += len(chunk)
        os.fchmod(out, mode)
    finally:
        os.close(out)


@dataclass
class HeldFiles:
    """A pre-merge record in progress (see :meth:`CheckpointStore.hold_files`)."""

    base: Path
    index: dict[str, str] = field(default_factory=dict)
    open: list[tuple[str, int, int]] = field(default_factory=list)

    def finish(self) -> None:
        """Copy the held files, write the index durably, drop the ``pending`` marker."""
        try:
            for rel, fd, mode in self.open:
                _copy_fd(fd, self.base / "files" / rel, mode)
        finally:
            self.close()
        _atomic_write(
            self.base / "index.json", json.dumps(self.index, sort_keys=True).encode(), durable=True
        )
        (self.base / PENDING).unlink(missing_ok=True)

    def close(self) -> None:
        for _rel, fd, _mode in self.open:
            os.close(fd)
        self.open = []


class CheckpointStore:
    """Saves and restores the fork anchors of one workspace."""

    def __init__(self, store: ForkStore) -> None:
        self.store = store

    def _dir(self, fork_id: str, kind: str) -> Path:
        return self.store.fork_dir(fork_id) / "checkpoints" / kind

    def save(
        self,
        fork_id: str,
        kind: str,
        history_json: bytes,
        *,
        parent_workspace_branch_id: str | None = None,
    ) -> str:
        """Record the history of anchor ``kind`` (``fork`` or ``post-fork``); returns its id."""
        base = self._dir(fork_id, kind)
        _atomic_write(base / "history.json", history_json)
        meta = {
            "id": f"{kind}:{fork_id}",
            "fork_id": fork_id,
            "kind": kind,
            "created_at": time.time(),
            "parent_workspace_branch_id": parent_workspace_branch_id,
        }
        _atomic_write(base / "checkpoint.json", json.dumps(meta).encode())
        return meta["id"]

    def record_files(self, fork_id: str, kind: str, parent_dir: Path, paths: list[str]) -> None:
        """Record the current state of ``paths`` (relative to ``parent_dir``) into ``kind``."""
        base = self._dir(fork_id, kind)
        files = base / "files"
        if files.exists():
            shutil.rmtree(files)
        index: dict[str, str] = {}
        made: set[Path] = set()
        for rel in sorted(set(paths)):
            src = parent_dir / rel
            try:
                st = os.lstat(src)
            except FileNotFoundError:
                index[rel] = "absent"
                continue
            if os.path.islink(src):
                index[rel] = "link:" + os.readlink(src)
            elif os.path.isdir(src):
                index[rel] = "dir"
            else:
                dst = files / rel
                if dst.parent not in made:
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    made.add(dst.parent)
                shutil.copyfile(src, dst)
                os.chmod(dst, st.st_mode & 0o7777)
                index[rel] = "file"
        _atomic_write(base / "index.json", json.dumps(index, sort_keys=True).encode(), durable=True)

    def hold_files(self, fork_id: str, kind: str, parent_dir: Path, paths: list[str]) -> HeldFiles:
        """Begin recording ``paths`` as they are now, without copying anything yet.

        Regular files are opened (read-only; opening changes no time stamp the commit's
        conflict rule reads) and their descriptors kept: the commit replaces each changed
        path by rename, so an open descriptor still reads the pre-merge bytes afterwards.
        :meth:`HeldFiles.finish` copies them, in a worker thread after the commit, so a
        merge costs the same for a 1 KB and a 1 GB file and never waits on a copy. Until
        then a ``pending`` marker says the record is incomplete (a process killed in between
        leaves a checkpoint that refuses to rewind those files rather than restoring
        wrong bytes). Beyond ``MAX_HELD`` files the rest are copied at once.
        """
        base = self._dir(fork_id, kind)
        files = base / "files"
        if files.exists():
            shutil.rmtree(files)
        base.mkdir(parents=True, exist_ok=True)
        held = HeldFiles(base)
        _atomic_write(base / PENDING, b"")
        try:
            for rel in sorted(set(paths)):
                src = parent_dir / rel
                try:
                    st = os.lstat(src)
                except FileNotFoundError:
                    held.index[rel] = "absent"
                    continue
                if stat.S_ISLNK(st.st_mode):
                    held.index[rel] = "link:" + os.readlink(src)
                elif stat.S_ISDIR(st.st_mode):
                    held.index[rel] = "dir"
                elif len(held.open) < MAX_HELD:
                    try:
                        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    except FileNotFoundError:
                        held.index[rel] = "absent"
                        continue
                    held.open.append((rel, fd, st.st_mode & 0o7777))
                    held.index[rel] = "file"
                else:
                    _copy_into(src, files / rel, st.st_mode)
                    held.index[rel] = "file"
        except BaseException:
            held.close()
            raise
        return held

    def get(self, checkpoint_id: str) -> Checkpoint | None:
        kind, fork_id = parse_checkpoint_id(checkpoint_id)
        base = self._dir(fork_id, kind)
        try:
            meta = json.loads((base / "checkpoint.json").read_bytes())
        except (OSError, ValueError):
            return None
        return Checkpoint(
            id=meta["id"],
            fork_id=fork_id,
            kind=kind,
            created_at=float(meta["created_at"]),
            has_files=(base / "index.json").exists(),
            parent_workspace_branch_id=meta.get("parent_workspace_branch_id"),
        )

    def list(self) -> list[Checkpoint]:
        out = []
        if self.store.forks_dir.is_dir():
            for fork_dir in self.store.forks_dir.iterdir():
                for kind in KINDS:
                    cp = self.get(f"{kind}:{fork_dir.name}")
                    if cp is not None:
                        out.append(cp)
        return sorted(out, key=lambda c: c.created_at)

    def rewind(self, checkpoint_id: str, target_dir: Path | None = None) -> list[Any]:
        """Restore the files of ``checkpoint_id`` into ``target_dir``; return its history.

        ``target_dir`` defaults to the workspace root (right for a fork of the main run; a
        nested fork's anchors restore into its parent branch's ``path``).
        """
        kind, fork_id = parse_checkpoint_id(checkpoint_id)
        base = self._dir(fork_id, kind)
        if not (base / "checkpoint.json").exists():
            raise NotFoundError(f"no checkpoint {checkpoint_id!r}")
        target = Path(target_dir) if target_dir is not None else self.store.root
        index_path = base / "index.json"
        if (base / PRUNED).exists():
            raise InvalidStateError(
                f"checkpoint {checkpoint_id} is older than the rewind window: its file "
                "copies were pruned ([fork] keep_resolved / fork/retention.py)"
            )
        if (base / PENDING).exists():
            raise InvalidStateError(
                f"checkpoint {checkpoint_id} is incomplete: the process exited while it "
                "recorded the files the merge replaced, so they cannot be restored"
            )
        if kind == "fork" and not index_path.exists():
            index: dict[str, str] = {}
        else:
            try:
                index = json.loads(index_path.read_bytes())
            except OSError:
                index = {}
        self._restore(index, base / "files", target)
        return load_history((base / "history.json").read_bytes())

    @staticmethod
    def _restore(index: dict[str, str], files: Path, target: Path) -> None:
        """Put every indexed path back as it was, through ``workspace.beneath``: the paths
        are those a merged branch touched, and that branch may have left a symlink where
        a directory was (``d -> ~``), so no link below ``target`` is ever followed (the
        link itself is removed or replaced, as the index says). A path that is not a
        plain relative path is refused (``UnsafeChangeError``) before anything changes."""
        bad = [(rel, reason) for rel in index if (reason := path_problem(rel))]
        if bad:
            raise refuse(bad, "a checkpoint's files")
        # Deepest first for removals, shallowest first for creations.
        for rel in sorted(index, key=lambda p: -p.count("/")):
            if index[rel] == "absent":
                with contextlib.suppress(UnsafeChangeError):  # below a link: not ours
                    beneath.remove(target, rel)
        below_links: list[tuple[str, str]] = []
        for rel in sorted(index, key=lambda p: p.count("/")):
            try:
                _restore_one(index[rel], files, target, rel)
            except UnsafeChangeError as exc:
                below_links.append((rel, str(exc)))
        if below_links:
            raise refuse(below_links, "a checkpoint's files (the rest were restored)")


def _restore_one(state: str, files: Path, target: Path, rel: str) -> None:
    """One indexed path back as the checkpoint holds it (no link below ``target``
    followed)."""
    if state == "dir":
        st = beneath.lstat(target, rel)
        if st is None or not stat.S_ISDIR(st.st_mode):
            beneath.remove(target, rel)
            beneath.mkdir(target, rel, None)
    elif state == "file":
        st = beneath.lstat(target, rel)
        if st is not None and stat.S_ISDIR(st.st_mode):
            beneath.remove(target, rel)
        beneath.write_file(
            target,
            rel,
            (files / rel).read_bytes(),
            mode=os.stat(files / rel).st_mode & 0o7777,
            tmp_prefix=".forkdeck-rewind-",
        )
    elif state.startswith("link:"):
        st = beneath.lstat(target, rel)
        if st is not None and stat.S_ISDIR(st.st_mode):
            beneath.remove(target, rel)
        beneath.symlink(target, rel, state[5:])


__all__ = ["Checkpoint", "CheckpointStore", "HeldFiles", "parse_checkpoint_id"]
