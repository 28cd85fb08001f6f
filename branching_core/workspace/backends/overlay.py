"""Kernel overlayfs branches, mounted by the mount helper in its private namespace.

A branch is one overlay mount: lower = the parent's layers (the workspace itself for a
top-level branch, the parent's upper stacked on its own lowers for a nested one),
upper/work in the branch's store directory. Creating one costs a mount, whatever the
size of the tree. ``.pydantic-deep`` is hidden from the view by a whiteout placed in
the upper layer before mounting. Mounts are ``volatile`` (no sync on unmount: an
aborted branch is thrown away, a committed one is published by rename).

Directory renames: unprivileged mounts must use ``userxattr``, where the kernel allows
no directory redirects, so renaming a directory that came from a lower layer fails
with EXDEV (``mv`` and git fall back to copying). As root the views are mounted with
``redirect_dir=on`` (trusted.overlay.* xattrs) and such renames just work; the commit
publishes a redirected directory (and any tree holding one) from a read-only merge of
the frozen layers, since its content lives in the lower directory its redirect names.
Each branch records its format in ``<store>/format``; a nested branch uses its
parent's, so a stack is never mixed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import replace
from pathlib import Path

from branching_core.errors import MountError
from branching_core.workspace.backends.base import (
    META_NAME,
    Backend,
    BranchLayout,
    ParentView,
    meta_text,
)
from branching_core.workspace.backends.spares import pool_for
from branching_core.workspace.changes import Op
from branching_core.workspace.faults import crash_point
from branching_core.workspace.fsutil import (
    PROJECT_STATE_DIR,
    has_xattr,
    is_json_object,
    is_whiteout,
    read_json,
    rmtree,
)
from branching_core.workspace.mount_helper import (
    MountHelper,
    PreparedMount,
    UmountError,
    helper_for,
    pin_helper,
    shared_helper,
)
from branching_core.workspace.paths import is_internal_path
from branching_core.workspace.reaper import discard_dirs

OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")
ORIGIN_XATTRS = ("user.overlay.origin", "trusted.overlay.origin")
REDIRECT_XATTR = "trusted.overlay.redirect"
WHITEOUT_MODE = stat.S_IFCHR | 0o600
REDIRECT_FORMAT = "redirect"  # meta.json "format" of a branch mounted with redirect_dir=on
# store root -> (directory renames work, why not)
_DIR_RENAMES: dict[Path, tuple[bool, str]] = {}
UNPRIVILEGED_WHY = (
    "unprivileged overlay mounts need userxattr, which allows no directory redirects: "
    "renaming a directory that existed before the branch fails with EXDEV"
)


class OverlayBackend(Backend):
    name = "overlay"

    @classmethod
    def probe(cls, workspace: Path, store_root: Path) -> str | None:
        try:  # one that sees the workspace and store as they are now (mounted since?)
            helper = shared_helper(workspace.resolve(), store_root.resolve())
            pin_helper(store_root, helper)
        except (MountError, OSError) as exc:
            return f"no private mount namespace: {exc}"
        probe_dir = store_root / f".probe-overlay-{os.getpid()}"
        redirect_why = UNPRIVILEGED_WHY
        for redirect in (True, False) if os.geteuid() == 0 else (False,):
            try:
                rmtree(probe_dir)
                for sub in ("upper", "work", "view"):
                    (probe_dir / sub).mkdir(parents=True)
                os.mknod(probe_dir / "upper" / PROJECT_STATE_DIR, WHITEOUT_MODE, os.makedev(0, 0))
                helper.mount_overlay(
                    [workspace],
                    probe_dir / "upper",
                    probe_dir / "work",
                    probe_dir / "view",
                    redirect=redirect,
                )
                helper.umount(probe_dir / "view")
            except (MountError, OSError) as exc:
                if redirect:
                    redirect_why = f"redirect_dir=on refused here ({exc})"
                    continue
                return f"overlay mount failed: {exc}"
            finally:
                rmtree(probe_dir)
            _DIR_RENAMES[store_root] = (redirect, "" if redirect else redirect_why)
            return None
        return "overlay mount failed"

    def __init__(self, store_root: Path) -> None:
        super().__init__(store_root)
        self.dir_renames, self.dir_renames_why = _DIR_RENAMES.get(
            store_root, (False, UNPRIVILEGED_WHY)
        )
        self._spares = pool_for(store_root)  # made ahead by the helper (see spares.py)

    @property
    def helper(self) -> MountHelper:
        return helper_for(self.store_root)

    def create(self, branch_id: str, parent: ParentView) -> BranchLayout:
        return self.create_many([branch_id], parent)[0]

    def create_many(
        self,
        branch_ids: list[str],
        parent: ParentView,
        metas: list[dict[str, object]] | None = None,
        *,
        durable: bool = True,
    ) -> list[BranchLayout]:
        """Every branch's store directories, whiteout, files and mount in one helper
        round trip (the helper makes them right before mounting); all or none. The
        on-disk format is recorded in ``meta.json`` (one file per branch, not two)."""
        redirect = self._redirect_for(parent)
        layouts: list[BranchLayout] = []
        prepared: list[PreparedMount] = []
        for i, branch_id in enumerate(branch_ids):
            store_dir = self.store_root / branch_id
            upper, work, view = store_dir / "upper", store_dir / "work", store_dir / "view"
            files: dict[Path, str] = {}
            if metas is not None:
                meta = {**metas[i], "format": REDIRECT_FORMAT} if redirect else metas[i]
                files[store_dir / META_NAME] = meta_text(meta)
            elif redirect:
                files[store_dir / "format"] = REDIRECT_FORMAT
            prepared.append(
                PreparedMount(
                    lower=parent.layers,
                    upper=upper,
                    work=work,
                    target=view,
                    dirs=[store_dir, upper, work, view],  # = SPARE_DIRS, in that order
                    whiteouts=[upper / PROJECT_STATE_DIR],  # = WHITEOUT
                    files=files,
                )
            )
            layouts.append(
                BranchLayout(
                    branch_id=branch_id,
                    store_dir=store_dir,
                    layers=[upper, *parent.layers],
                    extra={"redirect": redirect},
                )
            )
        helper = self.helper
        # a batch of top-level siblings gets (and leaves for the next one) spares whose
        # view is mounted already: every such batch has the same layers, the workspace
        premount = len(prepared) > 1 and self._is_top_level(parent)
        lower = parent.layers if premount else None
        with self._spares.lock:  # held through the request: see SparePool
            spares, make = self._spares.take(
                branch_ids[0], len(prepared), lower, redirect, helper.pid
            )
            for one, (spare, mounted) in zip(prepared, spares, strict=True):
                one.spare, one.spare_mounted = spare, mounted
            try:
                helper.create_many(prepared, redirect=redirect, make_spares=make)
            except BaseException:
                for layout in layouts:
                    rmtree(layout.store_dir)  # the helper unmounted what it had mounted
                self._spares.put_back(spares, lower, redirect)
                raise
        for layout in layouts:
            self._mounted(layout, helper)
        return layouts

    def _is_top_level(self, parent: ParentView) -> bool:
        """Is ``parent`` the workspace itself (not a branch of it)?"""
        top = parent.layers[0] if parent.layers else None
        return not (
            top is not None and top.name == "upper" and top.parent.parent == self.store_root
        )

    def close(self) -> None:
        """Unmount and discard the spares made ahead for this store (see spares.py)."""
        self._spares.close()

    def _redirect_for(self, parent: ParentView) -> bool:
        """A nested branch keeps its parent's format; a top-level one gets this mount's."""
        if not self._is_top_level(parent):
            return _is_redirect_format(parent.layers[0].parent)
        return self.dir_renames

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
            parent.layers,
            layout.store_dir / "upper",
            layout.store_dir / "work",
            target,
            redirect=bool(layout.extra.get("redirect")),
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
        if layout.extra.get("redirect"):
            ops = self._resolve_redirects(layout, ops)
        return ops

    def _resolve_redirects(self, layout: BranchLayout, ops: list[Op]) -> list[Op]:
        """Trees holding a renamed directory are published from the merged view: the
        upper only holds the directory's changes, its content is in a lower layer.

        While the view is mounted (``changes()``) the view itself is the source; for a
        commit (frozen) the layers are merged read-only once and the trees copied out.
        """
        trees = [i for i, op in enumerate(ops) if op.tree and _holds_redirect(Path(str(op.source)))]
        if not trees:
            return ops
        out = list(ops)
        if layout.mounted:
            assert layout.view is not None
            for i in trees:
                out[i] = replace(out[i], source=str(layout.view / out[i].path))
            return out
        helper = self.helper
        merged = layout.store_dir / "merged"
        target = layout.store_dir / "ro"
        rmtree(merged)
        target.mkdir(exist_ok=True)
        helper.mount_read_only(layout.layers, target)
        try:
            for n, i in enumerate(trees):
                copy = merged / str(n)
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy_tree_exact(helper.view_path(target) / out[i].path, copy)
                out[i] = replace(out[i], source=str(copy))
        finally:
            helper.umount(target)
        return out

    def _collect_dir(self, upper_dir: Path, rel_dir: str, parent_root: Path, ops: list[Op]) -> None:
        try:
            entries = list(os.scandir(upper_dir))
        except FileNotFoundError:
            return
        parent_str = str(parent_root)  # str joins: a Path per changed file cost ~15 us
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if is_internal_path(rel):  # never a change (paths.py: the one predicate)
                continue
            st = entry.stat(follow_symlinks=False)
            try:
                parent_st: os.stat_result | None = os.lstat(f"{parent_str}/{rel}")
            except (FileNotFoundError, NotADirectoryError):
                parent_st = None
            parent_is_dir = parent_st is not None and stat.S_ISDIR(parent_st.st_mode)
            if is_whiteout(st):
                if parent_st is not None:
                    ops.append(Op("delete", rel))
            elif stat.S_ISDIR(st.st_mode):
                source = Path(entry.path)
                if (
                    parent_st is None
                    or not parent_is_dir
                    or any(has_xattr(source, name) for name in OPAQUE_XATTRS)
                    or has_xattr(source, REDIRECT_XATTR)
                ):
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
                copied_up = stat.S_ISREG(st.st_mode) and _has_any_xattr(entry.path, ORIGIN_XATTRS)
                # Whether the parent had this path at the fork is unknown here (existed
                # None), with or without an origin xattr: a copied-up file may have been
                # renamed, and a file without one is either new or one the branch's writer
                # renamed over the parent's (editors, ``sed -i``, agent CLIs: temp file +
                # rename leaves no trace in the upper layer). The conflict rule asks the
                # parent's side instead (``changes.find_conflicts``, ``workspace.landed``);
                # our own tools say so beforehand (``Branch.note_replacing``).
                ops.append(
                    Op("put", rel, source=entry.path, copied_up=copied_up, strip_xattrs=True)
                )

    def unchanged_from_parent(self, layout: BranchLayout, rel: str) -> bool:
        # Not in the upper layer (nor hidden by a whiteout there): the view shows the
        # lower file, the parent's. A rename over it would leave an upper file with no
        # origin xattr, which ``collect`` takes for a file the branch created.
        upper = layout.store_dir / "upper"
        node = upper
        for part in rel.split("/"):
            node = node / part
            if os.path.lexists(node):
                return False
        return True

    def freeze(self, layout: BranchLayout) -> None:
        if layout.mounted:
            self.helper.umount(layout.store_dir / "view")
            layout.mounted = False

    def thaw(self, layout: BranchLayout, parent: ParentView) -> None:
        rmtree(layout.store_dir / "merged")
        if not layout.mounted:
            self._mount(layout, parent)

    def destroy(self, layout: BranchLayout) -> None:
        self.destroy_many([layout])

    def destroy_many(self, layouts: list[BranchLayout]) -> None:
        """Unmount every view in one helper round trip, then rename each store directory
        into the trash (the branches are gone at once; one background job removes their
        layers). A directory whose view could not be unmounted is never moved: it is
        removed in place (the helper's namespace keeps the mount, not our files)."""
        mounted = [layout for layout in layouts if layout.mounted]
        still_mounted: set[Path] = set()
        if mounted:
            try:
                self.helper.umount_many([layout.store_dir / "view" for layout in mounted])
            except UmountError as exc:
                still_mounted = set(exc.failed)
            for layout in mounted:
                layout.mounted = False
        crash_point("discard:unmounted")
        trash = self.store_root / "trash"
        moves: list[tuple[Path, Path]] = []
        for layout in layouts:
            if layout.store_dir / "view" in still_mounted:
                rmtree(layout.store_dir)
            else:
                moves.append((layout.store_dir, trash / layout.store_dir.name))
        discard_dirs(moves)

    def reopen(self, branch_id: str, parent: ParentView) -> BranchLayout:
        store_dir = self.store_root / branch_id
        layout = BranchLayout(
            branch_id=branch_id,
            store_dir=store_dir,
            layers=[store_dir / "upper", *parent.layers],
            extra={"redirect": _is_redirect_format(store_dir)},
        )
        self._mount(layout, parent)
        return layout


def _is_redirect_format(store_dir: Path) -> bool:
    """The format recorded in the branch's ``meta.json`` (or, for branches made before
    it went there, in its ``format`` file)."""
    with contextlib.suppress(OSError, ValueError):
        meta = read_json(store_dir / META_NAME)
        if is_json_object(meta) and "format" in meta:
            return meta["format"] == REDIRECT_FORMAT
    try:
        return (store_dir / "format").read_text().strip() == REDIRECT_FORMAT
    except OSError:
        return False  # branches made before the format was recorded used userxattr


def _holds_redirect(root: Path) -> bool:
    """Is ``root`` (an upper-layer directory) or any directory under it redirected?"""
    if has_xattr(root, REDIRECT_XATTR):
        return True
    for dirpath, dirnames, _ in os.walk(root):
        for name in dirnames:
            if has_xattr(Path(dirpath) / name, REDIRECT_XATTR):
                return True
    return False


def copy_tree_exact(source: Path, target: Path) -> None:
    """Copy a tree keeping modes, times and (when allowed) owners; symlinks as links."""
    shutil.copytree(source, target, symlinks=True)
    if os.geteuid() != 0:
        return
    for src_dir, dirnames, filenames in os.walk(source):
        rel = os.path.relpath(src_dir, source)
        for name in [".", *dirnames, *filenames]:
            src = os.path.normpath(os.path.join(src_dir, name))
            dst = os.path.normpath(os.path.join(target, rel, name))
            st = os.lstat(src)
            with contextlib.suppress(OSError):
                os.chown(dst, st.st_uid, st.st_gid, follow_symlinks=False)


def _has_any_xattr(path: str, names: tuple[str, ...]) -> bool:
    """Does ``path`` (not followed) carry one of ``names``? One ``llistxattr`` for all of
    them, where a ``getxattr`` per name cost up to three syscalls per changed file."""
    try:
        present = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return False
    return any(name in present for name in names)
