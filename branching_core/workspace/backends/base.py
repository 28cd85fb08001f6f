"""The contract every copy-on-write backend fulfils."""

from __future__ import annotations

import abc
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from branching_core.workspace.changes import Op

META_NAME = "meta.json"


def write_new_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, which must not exist yet (open, write, close: no temp
    file and rename, since no reader can have seen an older version of it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        data = text.encode()
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def meta_text(meta: dict[str, object]) -> str:
    return json.dumps(meta, sort_keys=True)


@dataclass
class ParentView:
    """What a new branch is made from: the parent's view and (for overlay) its layers."""

    root: Path
    layers: list[Path] = field(default_factory=list[Path])


@dataclass
class BranchLayout:
    """Where one branch's data lives in the store, and what its view is."""

    branch_id: str
    store_dir: Path
    view: Path | None = None
    layers: list[Path] = field(default_factory=list[Path])
    mounted: bool = False
    extra: dict[str, object] = field(default_factory=dict[str, object])


class Backend(abc.ABC):
    name: str = ""
    # Can a branch rename a directory that existed before it was made? (see overlay)
    dir_renames: bool = True
    dir_renames_why: str = ""

    def __init__(self, store_root: Path) -> None:
        self.store_root = store_root

    @classmethod
    @abc.abstractmethod
    def probe(cls, workspace: Path, store_root: Path) -> str | None:
        """None when this backend works for ``workspace``, else a one-line reason."""

    @abc.abstractmethod
    def create(self, branch_id: str, parent: ParentView) -> BranchLayout:
        """Make the branch's view; must not depend on the size of the tree where avoidable."""

    def create_many(
        self,
        branch_ids: list[str],
        parent: ParentView,
        metas: list[dict[str, object]] | None = None,
        *,
        durable: bool = True,
    ) -> list[BranchLayout]:
        """Several sibling views at once (a fork of N). Backends with a per-call fixed cost
        override this to pay it once; all are made or none (made ones are destroyed).

        ``metas``: each branch's ``meta.json``, written into its store directory as part
        of making it (a plain write of a new file: a torn one can only be left by a
        process that died before the branches existed for anyone, and recovery removes
        a dead session's branch whose meta does not parse). ``durable``: the branches
        will be reopened after a restart, so whatever reopening needs goes to disk too;
        an ordinary branch keeps what it can in memory."""
        layouts: list[BranchLayout] = []
        try:
            for i, branch_id in enumerate(branch_ids):
                layouts.append(self.create(branch_id, parent))
                if metas is not None:
                    write_new_file(layouts[-1].store_dir / META_NAME, meta_text(metas[i]))
        except BaseException:
            self.destroy_many(layouts)
            raise
        return layouts

    @abc.abstractmethod
    def collect(self, layout: BranchLayout, parent: ParentView) -> list[Op]:
        """The branch's changes relative to ``parent`` as commit operations."""

    def unchanged_from_parent(self, layout: BranchLayout, rel: str) -> bool:
        """Does the branch still show the parent's own ``rel``, untouched so far?

        Asked just before a writer replaces ``rel`` by temp file + rename: a backend that
        cannot otherwise tell a replaced file from a created one (overlay) answers True
        so the branch can remember the path existed. Others answer False (they know).
        """
        return False

    def freeze(self, layout: BranchLayout) -> None:  # noqa: B027 - optional hook
        """Stop the view changing so its sources can be moved into the parent."""

    def thaw(self, layout: BranchLayout, parent: ParentView) -> None:  # noqa: B027
        """Undo ``freeze`` after a commit that did not happen."""

    @abc.abstractmethod
    def destroy(self, layout: BranchLayout) -> None:
        """Remove the view and every byte of the branch's store."""

    def destroy_many(self, layouts: list[BranchLayout]) -> None:
        """Destroy several branches (siblings aborted together). Every one is tried;
        the first error is raised after. Backends override it to batch the work."""
        first: OSError | None = None
        for layout in layouts:
            try:
                self.destroy(layout)
            except OSError as exc:
                first = first or exc
        if first is not None:
            raise first

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the backend keeps between branches (the workspace is closed)."""

    @abc.abstractmethod
    def reopen(self, branch_id: str, parent: ParentView) -> BranchLayout:
        """Bring a durable branch's view back after a restart."""
