"""Crash-safe commit: stage, journal the intent, publish by rename, forget the journal.

A commit is a list of ``Op``s applied to a parent directory. Everything the ops need is
staged on the parent's filesystem before the journal is written and fsynced; that
write is the commit point. Every op is idempotent, so a commit interrupted at any
instant (SIGKILL included) is rolled forward by replaying the journal when the
workspace is next opened, and one that never reached its journal left the parent
untouched. Either way the parent ends up exactly before or exactly after the commit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from branching_core.errors import CommitError
from branching_core.workspace.changes import Op, ordered
from branching_core.workspace.fsutil import (
    PROJECT_STATE_DIR,
    lstat_or_none,
    read_json,
    rmtree,
    strip_overlay_xattrs,
    write_json_atomic,
)

CRASH_ENV = "FORKDECK_CRASH_AT"


def crash_point(name: str) -> None:
    """Fault injection for the crash-safety tests: SIGKILL ourselves at a named step.

    ``FORKDECK_CRASH_AT=op:3`` kills the process right after the fourth operation of a
    commit is applied; ``journaled`` right after the journal is durable, and so on.
    Costs one environment lookup when unset.
    """
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def scratch_dir(parent_root: Path, commit_id: str) -> Path:
    """Staging and displaced entries live beside the parent's files, on its filesystem."""
    return parent_root / PROJECT_STATE_DIR / "commit" / commit_id


@dataclass
class Journal:
    path: Path
    commit_id: str
    parent_id: str
    parent_root: Path
    ops: list[Op]
    generation: int
    branch_id: str
    created_state_dir: bool = False

    # -- preparation -----------------------------------------------------------------
    @classmethod
    def prepare(
        cls,
        journal_dir: Path,
        commit_id: str,
        *,
        parent_id: str,
        parent_root: Path,
        ops: list[Op],
        generation: int,
        branch_id: str,
    ) -> Journal:
        """Stage sources that cannot be renamed into the parent, then write the journal."""
        scratch = scratch_dir(parent_root, commit_id)
        created_state_dir = not (parent_root / PROJECT_STATE_DIR).exists()
        staged_ops: list[Op] = []
        parent_dev = os.stat(parent_root).st_dev
        for index, op in enumerate(ordered(ops)):
            if op.kind == "put" and op.source is not None:
                source_dev = os.lstat(op.source).st_dev if op.tree else _dev_of(Path(op.source))
                if source_dev != parent_dev:
                    staged = scratch / "staged" / str(index)
                    staged.parent.mkdir(parents=True, exist_ok=True)
                    _copy_entry(Path(op.source), staged)
                    op = Op(**{**op.__dict__, "source": str(staged)})
            staged_ops.append(op)
        journal = cls(
            path=journal_dir / f"{commit_id}.json",
            commit_id=commit_id,
            parent_id=parent_id,
            parent_root=parent_root,
            ops=staged_ops,
            generation=generation,
            branch_id=branch_id,
            created_state_dir=created_state_dir,
        )
        crash_point("staged")
        write_json_atomic(journal.path, journal.to_json(), durable=True)
        crash_point("journaled")
        return journal

    def to_json(self) -> dict[str, object]:
        return {
            "commit_id": self.commit_id,
            "parent_id": self.parent_id,
            "parent_root": str(self.parent_root),
            "ops": [op.to_json() for op in self.ops],
            "generation": self.generation,
            "branch_id": self.branch_id,
            "created_state_dir": self.created_state_dir,
        }

    @classmethod
    def load(cls, path: Path, *, parent_root: Path | None = None) -> Journal:
        data = read_json(path)
        return cls(
            path=path,
            commit_id=data["commit_id"],
            parent_id=data["parent_id"],
            parent_root=parent_root or Path(data["parent_root"]),
            ops=[Op.from_json(op) for op in data["ops"]],
            generation=int(data["generation"]),
            branch_id=data["branch_id"],
            created_state_dir=bool(data.get("created_state_dir")),
        )

    # -- publication ------------------------------------------------------------------
    def apply(self, set_generation: Callable[[str, int], None]) -> None:
        scratch = scratch_dir(self.parent_root, self.commit_id)
        try:
            for index, op in enumerate(self.ops):
                _apply_op(op, self.parent_root, scratch / "displaced" / str(index))
                crash_point(f"op:{index}")
            set_generation(self.parent_id, self.generation)
            crash_point("applied")
        except OSError as exc:
            raise CommitError(
                f"commit interrupted by {exc}; "
                "it will be completed when the workspace is next opened"
            ) from exc

    def finish(self) -> None:
        """Forget the journal and everything the commit displaced."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        rmtree(scratch_dir(self.parent_root, self.commit_id))
        _remove_empty_state_dirs(self.parent_root, remove_state_dir=self.created_state_dir)


def _dev_of(path: Path) -> int:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return os.stat(path.parent).st_dev
    return st.st_dev


def _copy_entry(source: Path, target: Path) -> None:
    if source.is_dir() and not source.is_symlink():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target, follow_symlinks=False)


def _apply_op(op: Op, parent_root: Path, displaced: Path) -> None:
    target = parent_root / op.path
    if op.kind == "delete":
        if lstat_or_none(displaced) is None and lstat_or_none(target) is not None:
            displaced.parent.mkdir(parents=True, exist_ok=True)
            os.rename(target, displaced)
    elif op.kind == "mkdir":
        st = lstat_or_none(target)
        if st is None:
            os.mkdir(target, op.mode if op.mode is not None else 0o755)
        if op.mode is not None:
            os.chmod(target, op.mode)
    elif op.kind == "put":
        assert op.source is not None
        source = Path(op.source)
        if lstat_or_none(source) is not None:
            os.rename(source, target)
        if op.strip_xattrs and lstat_or_none(target) is not None:
            _strip_tree(target)
    elif op.kind == "chmod" and op.mode is not None and lstat_or_none(target) is not None:
        os.chmod(target, op.mode)


def _strip_tree(path: Path) -> None:
    if not path.is_symlink():
        strip_overlay_xattrs(path)
    if path.is_dir() and not path.is_symlink():
        for dirpath, dirnames, filenames in os.walk(path):
            for name in dirnames + filenames:
                full = Path(dirpath) / name
                if not full.is_symlink():
                    strip_overlay_xattrs(full)


def _remove_empty_state_dirs(parent_root: Path, *, remove_state_dir: bool) -> None:
    """Leave no empty scratch behind; ``.pydantic-deep`` itself only if the commit made it."""
    directories = [parent_root / PROJECT_STATE_DIR / "commit"]
    if remove_state_dir:
        directories.append(parent_root / PROJECT_STATE_DIR)
    for directory in directories:
        with contextlib.suppress(OSError):
            directory.rmdir()
