"""Kernel overlayfs branches, mounted by the mount helper in its private namespace.

A branch is one overlay mount: lower = the parent's layers (the workspace itself for a
top-level branch, the parent's upper stacked on its own lowers for a nested one),
upper/work in the branch's store directory. Creating one costs a mount, whatever the
size of the tree. ``.pydantic-deep`` is hidden from the view by a whiteout placed in
the upper layer before mounting. Mounts use ``userxattr`` (the same on-disk format as
root and unprivileged) and ``volatile`` (no sync on unmount: an aborted branch is
thrown away, a committed one is published by rename).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from branching_core.errors import MountError
from branching_core.workspace.backends.base import Backend, BranchLayout, ParentView
from branching_core.workspace.changes import Op
from branching_core.workspace.fsutil import (
    PROJECT_STATE_DIR,
    has_xattr,
    is_whiteout,
    lstat_or_none,
    rmtree,
)
from branching_core.workspace.mount_helper import MountHelper, shared_helper

OPAQUE_XATTR = "user.overlay.opaque"
ORIGIN_XATTR = "user.overlay.origin"
WHITEOUT_MODE = stat.S_IFCHR | 0o600


class OverlayBackend(Backend):
    name = "overlay"

    @classmethod
    def probe(cls, workspace: Path, store_root: Path) -> str | None:
        try:
            helper = shared_helper()
        except (MountError, OSError) as exc:
            return f"no private mount namespace: {exc}"
        probe_dir = store_root / f".probe-overlay-{os.getpid()}"
        try:
            rmtree(probe_dir)
            for sub in ("upper", "work", "view"):
                (probe_dir / sub).mkdir(parents=True)
            os.mknod(probe_dir / "upper" / PROJECT_STATE_DIR, WHITEOUT_MODE, os.makedev(0, 0))
            helper.mount_overlay(
                [workspace], probe_dir / "upper", probe_dir / "work", probe_dir / "view"
            )
            helper.umount(probe_dir / "view")
        except (MountError, OSError) as exc:
            return f"overlay mount failed: {exc}"
        finally:
            rmtree(probe_dir)
        return None

    @property
    def helper(self) -> MountHelper:
        return shared_helper()

    def create(self, branch_id: str, parent: ParentView) -> BranchLayout:
        return self.create_many([branch_id], parent)[0]

    def create_many(self, branch_ids: list[str], parent: ParentView) -> list[BranchLayout]:
        """Prepare every store directory, then mount all views in one helper round trip."""
        layouts: list[BranchLayout] = []
        try:
            for branch_id in branch_ids:
                layouts.append(self._prepare(branch_id, parent))
            helper = self.helper
            helper.mount_overlays(
                [
                    (
                        parent.layers,
                        lay.store_dir / "upper",
                        lay.store_dir / "work",
                        lay.store_dir / "view",
                    )
                    for lay in layouts
                ]
            )
        except BaseException:
            for layout in layouts:
                rmtree(layout.store_dir)
            raise
        for layout in layouts:
            self._mounted(layout, helper)
        return layouts

    def _prepare(self, branch_id: str, parent: ParentView) -> BranchLayout:
        store_dir = self.store_root / branch_id
        upper, work, view = store_dir / "upper", store_dir / "work", store_dir / "view"
        store_dir.mkdir(parents=True)
        for path in (upper, work, view):
            path.mkdir()
        os.mknod(upper / PROJECT_STATE_DIR, WHITEOUT_MODE, os.makedev(0, 0))
        return BranchLayout(
            branch_id=branch_id, store_dir=store_dir, layers=[upper, *parent.layers]
        )

    def _mount(self, layout: BranchLayout, parent: ParentView) -> None:
        helper = self.helper
        target = layout.store_dir / "view"
        # A volatile upper that was not unmounted cleanly refuses to mount until its
        # marker is gone; the data is intact after a process crash (only a system
        # crash could lose it), so clear it.
        # The kernel leaves work/work mode 000; unprivileged, that hides its entries.
        with contextlib.suppress(OSError):
            os.chmod(layout.store_dir / "work" / "work", 0o700)
        rmtree(layout.store_dir / "work" / "work" / "incompat")
        helper.mount_overlay(
            parent.layers, layout.store_dir / "upper", layout.store_dir / "work", target
        )
        self._mounted(layout, helper)

    @staticmethod
    def _mounted(layout: BranchLayout, helper: MountHelper) -> None:
        """Record that ``layout``'s view is mounted by ``helper`` (and where it is reached)."""
        layout.view = helper.view_path(layout.store_dir / "view")
        layout.extra["helper_pid"] = helper.pid
        layout.mounted = True

    def collect(self, layout: BranchLayout, parent: ParentView) -> list[Op]:
        ops: list[Op] = []
        self._collect_dir(layout.store_dir / "upper", "", parent.root, ops)
        return ops

    def _collect_dir(self, upper_dir: Path, rel_dir: str, parent_root: Path, ops: list[Op]) -> None:
        try:
            entries = list(os.scandir(upper_dir))
        except FileNotFoundError:
            return
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if not rel_dir and entry.name == PROJECT_STATE_DIR:
                continue
            st = entry.stat(follow_symlinks=False)
            parent_st = lstat_or_none(parent_root / rel)
            parent_is_dir = parent_st is not None and stat.S_ISDIR(parent_st.st_mode)
            source = Path(entry.path)
            if is_whiteout(st):
                if parent_st is not None:
                    ops.append(Op("delete", rel))
            elif stat.S_ISDIR(st.st_mode):
                if parent_st is None or not parent_is_dir or has_xattr(source, OPAQUE_XATTR):
                    if parent_st is not None:
                        ops.append(Op("delete", rel))
                    ops.append(Op("put", rel, source=str(source), tree=True, strip_xattrs=True))
                else:
                    if stat.S_IMODE(st.st_mode) != stat.S_IMODE(parent_st.st_mode):
                        ops.append(Op("chmod", rel, mode=stat.S_IMODE(st.st_mode)))
                    self._collect_dir(source, rel, parent_root, ops)
            else:
                if parent_is_dir:
                    ops.append(Op("delete", rel))
                copied_up = stat.S_ISREG(st.st_mode) and has_xattr(source, ORIGIN_XATTR)
                ops.append(
                    Op("put", rel, source=str(source), copied_up=copied_up, strip_xattrs=True)
                )

    def freeze(self, layout: BranchLayout) -> None:
        if layout.mounted:
            self.helper.umount(layout.store_dir / "view")
            layout.mounted = False

    def thaw(self, layout: BranchLayout, parent: ParentView) -> None:
        if not layout.mounted:
            self._mount(layout, parent)

    def destroy(self, layout: BranchLayout) -> None:
        if layout.mounted:
            with contextlib.suppress(MountError):
                self.helper.umount(layout.store_dir / "view")
            layout.mounted = False
        rmtree(layout.store_dir)

    def reopen(self, branch_id: str, parent: ParentView) -> BranchLayout:
        store_dir = self.store_root / branch_id
        layout = BranchLayout(
            branch_id=branch_id, store_dir=store_dir, layers=[store_dir / "upper", *parent.layers]
        )
        self._mount(layout, parent)
        return layout
