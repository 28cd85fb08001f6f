"""The user's side of one fork's mirror: their edits in, conflicts out, stamps saved.

Why a module of its own: :mod:`~branching_core.fork.mirror.materializer` runs the watcher
threads and the branch -> mirror direction; what changes together here is the other
direction (an IDE open on ``branches/<label>/`` writing into the branch) and what it needs
to tell the user's writes from the mirror's across a restart: the stamps saved beside
the mirror (``mirror-stamps.json``). The rules for one path are in
:mod:`~branching_core.fork.mirror.edits`; this module locates the watcher's raw paths,
holds each branch while its edits are applied, reports the batches (and the conflicts
the mirror's syncs met) to ``on_edits``, saves and reloads the stamps, and keeps the
edits not applied yet when the mirror is removed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core.fork.mirror.edits import (
    EditBatch,
    apply_user_edits,
    editor_noise,
    take_conflicts,
)
from branching_core.fork.mirror.stamps import save_stamps, stash
from branching_core.fork.mirror.sync import MirroredBranch, MirrorTree, relevant, walk_files

if TYPE_CHECKING:
    from branching_core.workspace.branch import Branch

log = logging.getLogger(__name__)

STAMPS_FILE = "mirror-stamps.json"
"""What the mirror last wrote at each path (``stamps.save_stamps``): how a restarted process
tells an edit made while no one watched from the mirror's own copy."""


@contextlib.contextmanager
def branch_held(branch: Branch | None) -> Iterator[bool]:
    """Hold the branch's lock while mirroring it; yields False once it is closed.

    Commit and abort take the same lock, so the mirror never reads a view halfway through
    being published or thrown away (which would look like every file was deleted).
    """
    if branch is None:
        yield True
        return
    with branch.hold() as is_open:
        yield is_open


class EditIntake:
    """One fork's user-edit direction (see the module docstring).

    ``branches`` is the materializer's own dict (dirname -> branch), shared, not copied.
    """

    def __init__(
        self,
        tree: MirrorTree,
        fork_dir: Path,
        fork_id: str,
        branches: dict[str, MirroredBranch],
    ) -> None:
        self.tree = tree
        self.fork_dir = fork_dir
        self.fork_id = fork_id
        self.branches = branches
        self.on_edits: Callable[[EditBatch], None] | None = None
        self._refused_seen: dict[str, set[tuple[str, str]]] = {}
        self._saved: dict[str, Any] | None = None
        """The stamps file an earlier process left (read once, at the first add_branch)."""

    # -- stamps saved for the next process --------------------------------------------------
    def _labels(self) -> dict[str, str]:
        return {d: b.label for d, b in self.branches.items()}

    def save_stamps(self) -> None:
        """Save what the mirror wrote where (when it changed), for a restart after a kill."""
        if self.fork_dir.is_dir():
            save_stamps(
                self.tree.stamps, self.fork_dir / STAMPS_FILE, self._labels(), self.tree.lock
            )

    def load_saved_stamps(self, b: MirroredBranch) -> None:
        """Before ``b``'s directory is first written: take the stamps an earlier process
        saved for it. With them, what changed in the mirror while no process watched is
        the user's (kept, then applied to the branch or a conflict) instead of being
        overwritten by this process's first sync."""
        if self._saved is None:
            self._saved = {}
            with contextlib.suppress(OSError, ValueError):
                data = json.loads((self.fork_dir / STAMPS_FILE).read_bytes())
                self._saved = data if isinstance(data, dict) else {}
        with self.tree.lock:
            if self.tree.stamps.load(self._saved, {b.dirname: b.label}):
                self.tree.stamps.live = True

    # -- the user's edits -------------------------------------------------------------------
    def edit_batch(self, raws: Iterable[str]) -> None:
        """Apply the user's edits among ``raws`` (paths under ``branches/``)."""
        by_mirror: dict[str, set[str]] = {}
        for raw in raws:
            hit = self.locate(raw)
            if hit is not None:
                by_mirror.setdefault(hit[0].dirname, set()).add(hit[1])
        batches: dict[str, EditBatch] = {}
        for dirname, rels in by_mirror.items():
            b = self.branches[dirname]
            with branch_held(b.branch) as is_open:
                if is_open:
                    seen = self._refused_seen.setdefault(dirname, set())
                    batches[dirname] = apply_user_edits(self.tree, b, rels, seen)
        self.report(batches)
        self.save_stamps()

    def every_mirror_file(self) -> list[str]:
        """Every file in the branch directories, and every path the mirror last left a
        file at (one the user deleted while no process watched is among these)."""
        out: set[str] = set()
        for dirname in self.branches:
            root = self.tree.branch_root(dirname)
            if root.is_dir():
                out.update(f"{root}{os.sep}{rel}" for rel in walk_files(root))
            with self.tree.lock:
                out.update(f"{root}{os.sep}{rel}" for rel in self.tree.stamps.mirrored(dirname))
        return sorted(out)

    def report(self, batches: dict[str, EditBatch]) -> None:
        """Hand each branch's batch (plus conflicts its syncs found) to ``on_edits``."""
        names = self._labels()
        for dirname, conflicts in take_conflicts(self.tree, names).items():
            batch = batches.setdefault(dirname, EditBatch(names[dirname], dirname))
            batch.conflicts.extend(conflicts)
        callback = self.on_edits
        for batch in batches.values():
            if batch and callback is not None:
                try:
                    callback(batch)
                except Exception:  # a broken listener must not stop the watcher
                    log.exception("fork %s: reporting the user's edits failed", self.fork_id)

    def locate(self, raw: str) -> tuple[MirroredBranch, str] | None:
        """``branches/<dir>/<rel>`` of a mirrored branch (a user's or our own write)."""
        prefix = str(self.tree.branches_dir) + os.sep
        if not raw.startswith(prefix):
            return None
        dirname, _, rel = raw[len(prefix) :].partition(os.sep)
        b = self.branches.get(dirname)
        if b is None or not relevant(rel):
            return None
        return (b, rel)

    def keep_unapplied(self) -> list[Path]:
        """Copy every user edit the watcher had not applied yet (saved just before a merge
        or abort) to ``conflicts/``, so removing the mirror never loses it."""
        kept: list[Path] = []
        with self.tree.lock:
            for dirname in self.branches:
                root = self.tree.branch_root(dirname)
                if not root.is_dir():
                    continue
                for rel in walk_files(root):
                    if (
                        relevant(rel)
                        and not editor_noise(rel)
                        and self.tree.stamps.user_changed(dirname, rel)
                    ):
                        where = stash(root / rel, self.tree.conflicts_dir, dirname, rel)
                        if where is not None:
                            kept.append(where)
        for where in kept:
            log.warning("fork %s: an edit not applied in time is kept at %s", self.fork_id, where)
        return kept


__all__ = ["STAMPS_FILE", "EditIntake", "branch_held"]
