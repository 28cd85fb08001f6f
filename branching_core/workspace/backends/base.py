"""The contract every copy-on-write backend fulfils."""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from branching_core.workspace.changes import Op


@dataclass
class ParentView:
    """What a new branch is made from: the parent's view and (for overlay) its layers."""

    root: Path
    layers: list[Path] = field(default_factory=list)


@dataclass
class BranchLayout:
    """Where one branch's data lives in the store, and what its view is."""

    branch_id: str
    store_dir: Path
    view: Path | None = None
    layers: list[Path] = field(default_factory=list)
    mounted: bool = False
    extra: dict[str, object] = field(default_factory=dict)


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

    def create_many(self, branch_ids: list[str], parent: ParentView) -> list[BranchLayout]:
        """Several sibling views at once (a fork of N). Backends with a per-call fixed cost
        override this to pay it once; all are made or none (made ones are destroyed)."""
        layouts: list[BranchLayout] = []
        try:
            for branch_id in branch_ids:
                layouts.append(self.create(branch_id, parent))
        except BaseException:
            for layout in layouts:
                with contextlib.suppress(Exception):
                    self.destroy(layout)
            raise
        return layouts

    @abc.abstractmethod
    def collect(self, layout: BranchLayout, parent: ParentView) -> list[Op]:
        """The branch's changes relative to ``parent`` as commit operations."""

    def freeze(self, layout: BranchLayout) -> None:  # noqa: B027 - optional hook
        """Stop the view changing so its sources can be moved into the parent."""

    def thaw(self, layout: BranchLayout, parent: ParentView) -> None:  # noqa: B027
        """Undo ``freeze`` after a commit that did not happen."""

    @abc.abstractmethod
    def destroy(self, layout: BranchLayout) -> None:
        """Remove the view and every byte of the branch's store."""

    @abc.abstractmethod
    def reopen(self, branch_id: str, parent: ParentView) -> BranchLayout:
        """Bring a durable branch's view back after a restart."""
