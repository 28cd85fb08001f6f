"""``Workspace``: any existing directory, ready to be branched copy-on-write."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path

from branching_core.errors import (
    BackendUnavailableError,
    BranchError,
    BranchNotFoundError,
    WorkspaceError,
    WorkspaceNotADirectoryError,
    WorkspaceNotFoundError,
)
from branching_core.workspace.backends import AUTO_ORDER, BACKENDS, Backend
from branching_core.workspace.backends.base import BranchLayout, ParentView
from branching_core.workspace.branch import Branch, BranchNode
from branching_core.workspace.fsutil import PROJECT_STATE_DIR, rmtree
from branching_core.workspace.journal import STATE_INTENT, STATE_MARK, Journal
from branching_core.workspace.store import ROOT_ID, Store
from branching_core.workspace.store_gc import sweep_orphan_stores
from branching_core.workspace.tree import BranchTree

log = logging.getLogger(__name__)
_LIVE: weakref.WeakSet[Workspace] = weakref.WeakSet()


@dataclass(frozen=True)
class BranchInfo:
    """A branch found in the store (for listing and for reopening durable ones)."""

    id: str
    name: str
    parent: str
    branch_path: str
    durable: bool
    open_here: bool
    owner_alive: bool
    created_ns: int = 0  # wall clock (time.time_ns) when the branch was made


class Workspace(BranchNode):
    """A directory whose branches are isolated, instant views committed back atomically.

    ``backend="auto"`` picks the first of overlay, reflink and copy that works here and
    records why each one before it was passed over in ``passed_over``. ``store`` overrides
    where branch data lives (default: see ``default_store_root``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        backend: str = "auto",
        *,
        store: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__()
        raw = Path(path)
        if not raw.exists():
            raise WorkspaceNotFoundError(f"workspace {raw} does not exist")
        if not raw.is_dir():
            raise WorkspaceNotADirectoryError(f"workspace {raw} is not a directory")
        self.path = raw.resolve()
        self.workspace = self
        self.node_id = ROOT_ID
        self.branch_path = "/main"
        branch_store = Store(self.path, Path(store) if store is not None else None)
        try:
            branch_store.ensure()
        except OSError as exc:
            why = f"cannot create the branch store {branch_store.root} ({exc.strerror})"
            reasons = {name: why for name in (AUTO_ORDER if backend == "auto" else (backend,))}
            detail = "; ".join(f"{name}: {reason}" for name, reason in reasons.items())
            raise BackendUnavailableError(
                f"no backend can serve {self.path} ({detail})", reasons
            ) from exc
        self.passed_over: dict[str, str] = {}
        self.tree = BranchTree(branch_store, self._choose_backend(backend, branch_store.root))
        self.fstype = self.tree.backend.name
        self.recover()
        with contextlib.suppress(OSError):
            sweep_orphan_stores(branch_store.root.parent, keep=branch_store.root)
        _LIVE.add(self)

    @property
    def dir_renames(self) -> bool:
        """Whether branches can rename a directory that existed before them.

        True for copy and reflink, and for overlay when mounted by root (redirect_dir);
        False for unprivileged overlay, where such a rename fails with EXDEV (``mv`` and
        git fall back to copying). ``dir_renames_why`` says why not.
        """
        return self.tree.backend.dir_renames

    @property
    def dir_renames_why(self) -> str:
        return self.tree.backend.dir_renames_why

    # -- backend choice ------------------------------------------------------------------------
    def _choose_backend(self, requested: str, store_root: Path) -> Backend:
        if requested != "auto" and requested not in BACKENDS:
            raise WorkspaceError(
                f"unknown backend {requested!r}; choose one of auto, {', '.join(BACKENDS)}"
            )
        names = AUTO_ORDER if requested == "auto" else (requested,)
        reasons: dict[str, str] = {}
        for name in names:
            cls = BACKENDS[name]
            reason = cls.probe(self.path, store_root)
            if reason is None:
                self.passed_over = reasons
                for passed, why in reasons.items():
                    log.info("backend %s passed over for %s: %s", passed, self.path, why)
                return cls(store_root)
            reasons[name] = reason
        detail = "; ".join(f"{name}: {why}" for name, why in reasons.items())
        raise BackendUnavailableError(f"no backend can serve {self.path} ({detail})", reasons)

    # -- tree of branches ----------------------------------------------------------------------
    def parent_view(self) -> ParentView:
        return ParentView(root=self.path, layers=[self.path])

    def open_branches(self) -> list[Branch]:
        """Every branch of this workspace open in this process, parents before children."""
        return self.tree.open_branches()

    def get_branch(self, branch_id: str) -> Branch:
        branch = self.tree.get(branch_id)
        if branch is None:
            raise BranchNotFoundError(f"no open branch with id {branch_id!r} in {self.path}")
        return branch

    def list_branches(self) -> list[BranchInfo]:
        """Branches present in the store: this process's and durable ones left by others."""
        infos: list[BranchInfo] = []
        here = self.tree.open_ids()
        for branch_id in self.tree.store.branch_ids():
            meta = self.tree.store.read_meta(branch_id)
            if meta is None:
                continue
            infos.append(
                BranchInfo(
                    id=branch_id,
                    name=str(meta["name"]),
                    parent=str(meta["parent"]),
                    branch_path=str(meta["branch_path"]),
                    durable=bool(meta.get("durable")),
                    open_here=branch_id in here,
                    owner_alive=self.tree.store.session_alive(branch_id.split("-", 1)[0]),
                    created_ns=int(meta.get("created_ns") or 0),
                )
            )
        return infos

    def open_branch(self, branch_id: str) -> Branch:
        """Reopen a durable branch left by an earlier (possibly crashed) process."""
        open_here = self.tree.get(branch_id)
        if open_here is not None:
            return open_here
        meta = self.tree.store.read_meta(branch_id)
        if meta is None or not meta.get("durable"):
            raise BranchNotFoundError(f"no durable branch with id {branch_id!r} in {self.path}")
        parent_id = str(meta["parent"])
        parent: BranchNode = self if parent_id == ROOT_ID else self.open_branch(parent_id)
        layout: BranchLayout = self.tree.backend.reopen(branch_id, parent.parent_view())
        branch = Branch(
            parent,
            str(meta["name"]),
            layout,
            on_success=None,
            on_error=None,
            created_ns=int(meta["created_ns"]),
            root_names=frozenset(meta["root_names"])
            if meta.get("root_names") is not None
            else None,
            parent_generation=int(meta["parent_generation"]),
            durable=True,
        )
        parent._adopt_child(branch)
        self.tree.register(branch)
        return branch

    def discard_branch(self, branch_id: str) -> None:
        """Throw away a branch found in the store, with the branches nested in it.

        For sweeping durable branches nobody will reopen (the fork layer drops those no
        manifest refers to). A branch open in this process is aborted; one whose owning
        process is still alive elsewhere is refused (``BranchError``): it is in use.
        """
        here = self.tree.get(branch_id)
        if here is not None:
            if here.is_open:
                here.abort()
            return
        infos = {info.id: info for info in self.list_branches()}
        if branch_id not in infos:
            raise BranchNotFoundError(f"no branch with id {branch_id!r} in {self.path}")
        doomed = [branch_id]
        for current in doomed:  # grows while walking: every descendant
            doomed.extend(i.id for i in infos.values() if i.parent == current)
        for victim in doomed:
            info = infos[victim]
            if info.open_here:
                raise BranchError(f"branch {victim} is open in this process; abort it first")
            if info.owner_alive and not self.tree.store.is_own_session(victim.split("-", 1)[0]):
                raise BranchError(
                    f"branch {victim} ({info.branch_path}) belongs to a running process"
                )
        with self.tree.commit_lock():
            for victim in reversed(doomed):
                self.tree.store.remove_branch_dir(victim)

    # -- recovery --------------------------------------------------------------------------------
    def recover(self) -> None:
        """Finish interrupted commits and sweep what dead processes left behind.

        Runs on every open: a journal means a commit reached its commit point, so it is
        rolled forward; a branch whose owning process is gone is deleted unless durable.
        """
        store = self.tree.store
        with self.tree.commit_lock():
            for journal_path in sorted(store.journal_dir.glob("*.json")):
                self._replay(journal_path)
            store.sweep_batches()  # before durable branches are kept below
            for branch_id in store.branch_ids():
                sid = branch_id.split("-", 1)[0]
                if store.session_alive(sid):
                    continue
                meta = store.read_meta(branch_id)
                if meta is not None and meta.get("durable"):
                    continue
                store.remove_branch_dir(branch_id)
            store.sweep_generations()
            for probe in store.root.glob(".probe-*"):
                pid = probe.name.rsplit("-", 1)[-1]
                if not Path(f"/proc/{pid}").exists():
                    rmtree(probe)
            self._sweep_commit_scratch()
            store.sweep_temp_files()
            store.sweep_trash()
            store.sweep_spares()
            store.forget_dead_sessions()

    def _sweep_commit_scratch(self) -> None:
        """Remove staging left by commits that died before their journal (or after it
        was finished), and ``.pydantic-deep`` itself when such a commit had made it
        (its record in the store says so: ``journal.state_intent``)."""
        store = self.tree.store
        state_dir = self.path / PROJECT_STATE_DIR
        commit_scratch = state_dir / "commit"
        made_state_dir = False
        if commit_scratch.exists():
            for leftover in commit_scratch.iterdir():
                # Scratch is only made and used under the commit lock, which the caller
                # holds: without a journal it belongs to no commit in progress, anywhere.
                if (store.journal_dir / f"{leftover.name}.json").exists():
                    continue
                made_state_dir |= (leftover / STATE_MARK).exists()
                rmtree(leftover)
        intents: list[Path] = []
        for intent in store.journal_dir.glob(f"*{STATE_INTENT}"):
            commit_id = intent.name[: -len(STATE_INTENT)]
            if (store.journal_dir / f"{commit_id}.json").exists():
                continue  # its commit is pending: the journal's finish removes both
            try:
                root = Path(intent.read_text())
            except OSError:
                root = self.path
            made_state_dir |= root == self.path
            intents.append(intent)
        with contextlib.suppress(OSError):
            commit_scratch.rmdir()
        if made_state_dir:
            with contextlib.suppress(OSError):
                state_dir.rmdir()
        for intent in intents:  # last: the directory is gone (or was not only ours)
            intent.unlink(missing_ok=True)

    def _replay(self, journal_path: Path) -> None:
        """Finish one interrupted commit; one that cannot be finished is set aside.

        A journal that can go neither forward nor back (its sources are gone, the parent
        changed under it, the disk fails) must never keep the workspace from opening: it
        is moved to ``failed/`` in the store, with the branch data it refers to, and
        reported.
        """
        try:
            journal = Journal.load(journal_path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self._set_aside(journal_path, None, f"unreadable journal ({exc})")
            return
        if journal.parent_id == ROOT_ID:
            parent_root = self.path
        else:
            meta = self.tree.store.read_meta(journal.parent_id)
            if meta is None or not meta.get("durable"):
                # The parent branch died with its process; so does this commit.
                journal_path.unlink()
                self.tree.store.remove_branch_dir(journal.branch_id)
                return
            try:
                parent_root = self.open_branch(journal.parent_id).path
            except (BranchNotFoundError, OSError, WorkspaceError) as exc:
                self._set_aside(journal_path, journal.branch_id, f"parent unavailable ({exc})")
                return
        journal.parent_root = parent_root
        log.warning(
            "completing interrupted commit %s into %s", journal.commit_id, journal.parent_id
        )
        outcome = journal.run(self.tree.store.set_generation)
        if outcome.pending:
            errors = "; ".join(str(e) for e in outcome.errors) or "interrupted"
            self._set_aside(journal_path, journal.branch_id, errors)
        else:
            if outcome.rolled_back:
                log.warning(
                    "interrupted commit %s into %s was rolled back%s",
                    journal.commit_id,
                    journal.parent_id,
                    f" ({outcome.errors[0]})" if outcome.errors else "",
                )
            self.tree.store.remove_branch_dir(journal.branch_id)
        if outcome.interrupt is not None:
            raise outcome.interrupt

    def _set_aside(self, journal_path: Path, branch_id: str | None, why: str) -> None:
        place = self.tree.store.set_aside(journal_path, branch_id)
        log.error(
            "an interrupted commit in %s could not be finished (%s); it was set aside in %s",
            self.path,
            why,
            place,
        )
        warnings.warn(
            f"forkdeck: an interrupted commit in {self.path} could not be finished ({why}); "
            f"set aside in {place}",
            RuntimeWarning,
            stacklevel=3,
        )

    # -- lifetime --------------------------------------------------------------------------------
    def close(self) -> None:
        """Abort this process's ordinary branches and unmount durable ones (and drop the
        spare directories the backend made ahead)."""
        for branch in reversed(self.open_branches()):
            with contextlib.suppress(Exception):
                branch.close_for_exit()
        with contextlib.suppress(Exception):
            self.tree.backend.close()

    def __repr__(self) -> str:
        return f"<Workspace {self.path} backend={self.fstype}>"


def close_all_workspaces(timeout: float | None = 30.0) -> bool:
    """Do now what interpreter exit does for the engine: close every workspace of this
    process (abort ordinary branches, unmount durable ones), stop the mount helper and
    wait up to ``timeout`` for aborted branches' directories to be removed.

    For a process that must leave at once and cannot unwind normally, such as a server
    on SIGTERM whose worker threads are still blocked: after this, ``os._exit`` leaves
    nothing behind. Returns whether every removal finished in time.
    """
    from branching_core.workspace import reaper

    _close_all_workspaces()
    return reaper.drain(timeout)


@atexit.register
def _close_all_workspaces() -> None:
    for ws in list(_LIVE):
        ws.close()
    from branching_core.workspace.mount_helper import shutdown_shared_helper
    from branching_core.workspace.store import release_sessions

    shutdown_shared_helper()
    release_sessions()
