"""``Branch``: one isolated copy-on-write view of its parent, committed or aborted once.

Why one module of ~520 lines: the branch is one state machine (open -> committed, aborted
or pending) whose commit path (freeze, collect, refuse, journal, publish, thaw on every
failure) holds one lock from start to end; its steps are kept together so every exit of
that path can be checked in one read. The shared collaborators are elsewhere
(``tree.BranchTree``, ``journal``, ``changes``, ``precheck``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self

from branching_core.errors import (
    AbortError,
    BranchClosedError,
    BranchError,
    BranchingError,
    BranchStaleError,
    CommitError,
    ConflictError,
    InvalidBranchNameError,
    OpenChildrenError,
)
from branching_core.workspace.backends.base import BranchLayout, ParentView
from branching_core.workspace.changes import (
    BranchChanges,
    Op,
    lost_in_parent,
    summarize,
    without_internal,
)
from branching_core.workspace.faults import crash_point
from branching_core.workspace.guard import check_landing
from branching_core.workspace.journal import Journal
from branching_core.workspace.landed import LandingRecord
from branching_core.workspace.names import validate_branch_name
from branching_core.workspace.signals import deferred_signals

if TYPE_CHECKING:
    from branching_core.workspace.tree import BranchTree
    from branching_core.workspace.workspace import Workspace

log = logging.getLogger(__name__)
# "pending": the commit passed its commit point but could not finish here; the journal
# (and the branch's store, which holds its sources) wait for the next open's replay.
WorkspaceBranchState = Literal["open", "committed", "aborted", "pending"]
EXIT_WAIT_S = 120.0
OnSuccess = Literal["commit"] | None
OnError = Literal["abort"] | None


class BranchNode:
    """What workspaces and branches share: being a parent of branches."""

    workspace: Workspace
    tree: BranchTree
    """The store, backend, registry and commit lock every node of this workspace shares."""
    node_id: str
    branch_path: str

    def __init__(self) -> None:
        self._children: list[Branch] = []
        self._children_lock = threading.RLock()
        # may a child have committed into this node (so it has a generation file)?
        self._had_children = False

    def parent_view(self) -> ParentView:
        raise NotImplementedError

    def _check_can_branch(self) -> None:
        """Raise when this node may not get new children (closed or stale branches)."""

    @property
    def children(self) -> list[Branch]:
        with self._children_lock:
            return list(self._children)

    def branch(
        self,
        name: str,
        on_success: OnSuccess = "commit",
        on_error: OnError = "abort",
        *,
        durable: bool = False,
    ) -> Branch:
        """A new child branch; a context manager that commits on success, aborts on error.

        ``durable`` branches survive the process (even a crash) so a restarted program
        can reopen them with ``Workspace.open_branch``; ordinary ones are aborted when
        the process exits and swept away after a crash.
        """
        validate_branch_name(name)
        _check_policies(on_success, on_error)
        with self._children_lock:
            self._check_can_branch()
            if any(child.name == name for child in self._children):
                raise InvalidBranchNameError(
                    f"a branch named {name!r} is already open under {self.branch_path}"
                )
            (child,) = Branch.create_children(self, [name], on_success, on_error, durable=durable)
            self._children.append(child)
            self._had_children = True
            return child

    def branch_many(
        self,
        names: list[str],
        on_success: OnSuccess = "commit",
        on_error: OnError = "abort",
        *,
        durable: bool = False,
    ) -> list[Branch]:
        """Several sibling branches at once, all or none: what a fork of N needs.

        Same semantics as N calls of :meth:`branch`, but the backend pays its fixed cost
        once (the overlay backend mounts every view in one request to its mount helper).
        """
        for name in names:
            validate_branch_name(name)
        if len(set(names)) != len(names):
            raise InvalidBranchNameError(f"branch names must be unique: {names}")
        _check_policies(on_success, on_error)
        with self._children_lock:
            self._check_can_branch()
            taken = {child.name for child in self._children} & set(names)
            if taken:
                raise InvalidBranchNameError(
                    f"a branch named {sorted(taken)[0]!r} is already open under {self.branch_path}"
                )
            children = Branch.create_children(self, names, on_success, on_error, durable=durable)
            self._children.extend(children)
            self._had_children = bool(children) or self._had_children
            return children

    def abort_many(self, branches: Sequence[Branch]) -> None:
        """Throw several child branches of this node away at once: the counterpart of
        :meth:`branch_many` (a fork's or a pattern's losers).

        Same result as ``abort()`` on each (open children of theirs are aborted first),
        but the backend pays its fixed cost once: one unmount round trip to the mount
        helper for the whole batch, one background removal job. Branches already aborted
        are skipped, so calling it twice is harmless. Checked before anything is thrown
        away (then nothing is): every branch must be a child of this node, and none may be
        committed or have a commit pending (``BranchClosedError``). Holds every branch's
        lock throughout, so none of them can commit meanwhile.
        """
        victims = list(dict.fromkeys(branches))
        for branch in victims:
            # (anything that is not a branch has no parent: refused the same way)
            if getattr(branch, "parent", None) is not self:
                raise BranchError(f"{branch!r} is not a child branch of {self.branch_path}")
        with contextlib.ExitStack() as held:
            for branch in sorted(victims, key=lambda b: b.node_id):
                held.enter_context(branch.hold())
            closed = [b for b in victims if b.state in ("committed", "pending")]
            if closed:
                raise BranchClosedError(
                    f"{closed[0].branch_path} is already {closed[0].state}; nothing was aborted"
                )
            Branch.abort_held([b for b in victims if b.is_open])

    def _adopt_child(self, child: Branch) -> None:
        """Record ``child`` (a reopened durable branch) as open under this node."""
        with self._children_lock:
            self._children.append(child)
            self._had_children = True

    def _forget_child(self, child: Branch) -> None:
        with self._children_lock:
            if child in self._children:
                self._children.remove(child)


def _check_policies(on_success: object, on_error: object) -> None:
    """What ``branch`` and ``branch_many`` accept for what happens at the ``with``
    block's end."""
    if on_success not in ("commit", None):
        raise BranchError(f"on_success must be 'commit' or None, not {on_success!r}")
    if on_error not in ("abort", None):
        raise BranchError(f"on_error must be 'abort' or None, not {on_error!r}")


def _meta_of(
    branch_id: str,
    name: str,
    parent: BranchNode,
    backend: str,
    *,
    created_ns: int,
    parent_generation: int,
    durable: bool,
    root_names: frozenset[str] | None,
) -> dict[str, object]:
    """A branch's ``meta.json`` (what recovery, ``list_branches`` and reopening read)."""
    return {
        "id": branch_id,
        "name": name,
        "parent": parent.node_id,
        "branch_path": f"{parent.branch_path}/{name}",
        "backend": backend,
        "created_ns": created_ns,
        "parent_generation": parent_generation,
        "durable": durable,
        "pid": os.getpid(),
        "root_names": sorted(root_names) if root_names is not None else None,
    }


def _notify(hooks: Sequence[Callable[..., None]], *args: object) -> None:
    """Call commit observers (``BranchTree.before_commit``/``after_commit``); one that
    fails is logged, never a failed commit."""
    for hook in list(hooks):
        try:
            hook(*args)
        except Exception:
            log.exception("commit hook %r failed", hook)


def _keep_git_commits(branch: Branch, parent_root: Path) -> None:
    """Commits made inside the branch are not lost with its ``.git`` (which never lands):
    fetched into the parent's repository as ``forkdeck/<branch name>``, unless someone
    kept them already (a fork merge names them ``forkdeck/<fork>/<label>``, a pattern
    command ``forkdeck/<pattern>/<index>``). Never fails the commit (``gitops.refs``)."""
    view = branch.path
    if not (view / ".git").exists():
        return
    from branching_core.gitops.refs import land_branch_commits, ref_name

    names = branch.branch_path.split("/")[2:]  # "/main/a/b" -> forkdeck/a/b
    kept = land_branch_commits(view, parent_root, ref_name(*names), write_layer=branch.write_layer)
    branch.git_note = kept.line
    if kept.note is not None:
        log.warning("%s: %s", branch.branch_path, kept.note)


def _private_gitdirs(root: Path, layouts: list[BranchLayout], tree: BranchTree) -> None:
    """A workspace whose ``.git`` is a file pointing outside it (a worktree, a submodule):
    give each new top-level branch a git directory of its own, so git in the branch never
    writes the user's real HEAD, index or refs (``gitops.shadow``). All or none."""
    from branching_core.gitops.shadow import external_gitdir, make_private_gitdir

    gitdir = external_gitdir(root)
    if gitdir is None:
        return
    try:
        for layout in layouts:
            assert layout.view is not None
            make_private_gitdir(layout.view, gitdir)
    except (OSError, BranchingError) as exc:
        tree.backend.destroy_many(layouts)
        raise BranchError(f"cannot give the branch its own git directory: {exc}") from exc


class Branch(BranchNode):
    """An isolated view of its parent. Use ``.path`` like any directory."""

    def __init__(
        self,
        parent: BranchNode,
        name: str,
        layout: BranchLayout,
        *,
        on_success: OnSuccess,
        on_error: OnError,
        created_ns: int,
        parent_generation: int,
        durable: bool,
        root_names: frozenset[str] | None = None,
    ) -> None:
        super().__init__()
        self.workspace = parent.workspace
        self.tree = parent.tree
        self.parent = parent
        self.name = name
        self.node_id = layout.branch_id
        self.branch_path = f"{parent.branch_path}/{name}"
        self.on_success = on_success
        self.on_error = on_error
        self.created_ns = created_ns
        # the parent's top-level names at creation (see changes.find_conflicts)
        self.root_names = root_names
        self.parent_generation = parent_generation
        self.durable = durable
        self._layout = layout
        self.git_note: str | None = None
        """What happened to commits made inside the branch when it committed (kept as a
        ``forkdeck/...`` ref, or why not); ``None`` when there were none to keep."""
        self.landed_paths: list[str] | None = None
        """The parent paths the commit changed (directories stand for their content);
        ``None`` until committed."""
        self._state: WorkspaceBranchState = "open"
        self._lock = threading.RLock()
        self._close_hooks: list[Callable[[], None]] = []
        # paths a writer replaced while they still were the parent's (see note_replacing)
        self._replaced_parent_paths: set[str] = set()

    # -- creation -------------------------------------------------------------------------
    @classmethod
    def create_children(
        cls,
        parent: BranchNode,
        names: list[str],
        on_success: OnSuccess,
        on_error: OnError,
        *,
        durable: bool,
    ) -> list[Self]:
        """New children of ``parent``, made and mounted in one batch. Called by the
        parent's ``branch``/``branch_many`` (which validate the names and hold the
        parent's children lock); not a way around them."""
        tree = parent.tree
        store = tree.store
        ids = [store.new_branch_id() for _ in names]
        parent_generation = store.generation(parent.node_id)
        created_ns = time.time_ns()
        view = parent.parent_view()
        root_names = frozenset(os.listdir(view.root))
        metas = [
            _meta_of(
                branch_id,
                name,
                parent,
                tree.backend.name,
                created_ns=created_ns,
                parent_generation=parent_generation,
                durable=durable,
                root_names=root_names,
            )
            for branch_id, name in zip(ids, names, strict=True)
        ]
        # durable ones must exist all or none even across a crash (see Store.begin_batch)
        marker = store.begin_batch(ids) if durable else None
        try:
            # the backend writes each meta.json while making the branch (overlay: inside
            # the mount helper's one round trip for the whole batch)
            layouts = tree.backend.create_many(ids, view, metas, durable=durable)
            crash_point("branch_many:made")
        finally:  # made (or, on an error, removed by the backend): no longer pending
            if marker is not None:
                store.end_batch(marker)
        if parent is parent.workspace:
            _private_gitdirs(parent.workspace.path, layouts, tree)
        branches = [
            cls(
                parent,
                name,
                layout,
                on_success=on_success,
                on_error=on_error,
                created_ns=created_ns,
                parent_generation=parent_generation,
                durable=durable,
                root_names=root_names,
            )
            for name, layout in zip(names, layouts, strict=True)
        ]
        for branch in branches:
            tree.register(branch)
        return branches

    # -- public surface ---------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.node_id

    @property
    def path(self) -> Path:
        """A real directory holding this branch's view (ordinary file operations work)."""
        assert self._layout.view is not None
        return self._layout.view

    @property
    def write_layer(self) -> Path:
        """Where this branch's own writes physically land: the overlay upper directory,
        else the view itself (copy and reflink write in place). Watching it shows what
        this branch wrote, without the parent's files."""
        layers = self._layout.layers
        return Path(layers[0]) if layers else self.path

    @contextlib.contextmanager
    def hold(self) -> Generator[bool, None, None]:
        """Hold this branch still: commit and abort (which take the same lock) wait until
        the block ends. Yields whether the branch is still open, so a reader such as the
        fork mirror never sees a view halfway through being published or thrown away."""
        with self._lock:
            yield self.is_open

    @property
    def state(self) -> WorkspaceBranchState:
        return self._state

    @property
    def is_open(self) -> bool:
        return self._state == "open"

    @property
    def is_stale(self) -> bool:
        """True once a sibling has committed into the parent (first winner took it)."""
        return self.tree.store.generation(self.parent.node_id) != self.parent_generation

    def parent_view(self) -> ParentView:
        self._require_open()
        return ParentView(root=self.path, layers=list(self._layout.layers))

    def _check_can_branch(self) -> None:
        self._require_open()
        if self.is_stale:
            raise BranchStaleError(f"{self.branch_path} is stale: a sibling already committed")

    def _require_open(self) -> None:
        if self._state == "pending":
            raise BranchClosedError(
                f"{self.branch_path} has a commit pending; it is finished when the workspace "
                "is next opened"
            )
        if self._state != "open":
            raise BranchClosedError(f"{self.branch_path} is already {self._state}")

    def changes(self) -> BranchChanges:
        """Paths created, modified and deleted relative to the parent, right now."""
        with self._lock:
            self._require_open()
            parent = self.parent.parent_view()
            ops = self._collect(parent)
            summary = summarize(ops, parent.root)
            summary.lost_in_parent = lost_in_parent(
                ops, parent.root, self.created_ns, self.root_names, self._landings()
            )
            return summary

    def commit(
        self,
        *,
        keep_privileges: bool = False,
        on_ready: Callable[[list[Op], Path], None] | None = None,
    ) -> None:
        """Publish this branch's changes into its parent, atomically; then close it.

        ``on_ready(ops, parent_root)``, when given, is called with the ops about to be
        published once the landing rule has passed them, before the commit point: a
        caller that needs to know (or hold) what the commit changes learns it from the
        commit's own collection instead of listing the branch again. An exception from
        it stops the commit like a refusal: nothing applied, the branch left open.

        The one landing rule applies (``workspace.guard``): a change holding a device, a
        FIFO or a socket, or a path reached through a symlink, is refused as a whole with
        ``UnsafeChangeError`` (branch left open); setuid/setgid bits and file capabilities
        are stripped from what the branch produced unless ``keep_privileges``.

        Raises ``ConflictError`` (and aborts this branch) when a sibling already
        committed; raises ``ConflictError`` listing the paths (branch left open) when
        the parent changed a path this branch also changed, or changed it so the
        commit could not apply (a directory removed, a file turned into a directory);
        raises ``CommitError`` with nothing applied (branch left open) when a directory
        the commit must change is not writable, or when the commit fails half way and is
        rolled back. Only a commit that can go neither forward nor back here leaves the
        branch ``pending`` for the next open's replay.
        """
        tree = self.tree
        store = tree.store
        with self._lock:
            self._require_open()
            if self.children:
                names = ", ".join(child.name for child in self.children)
                raise OpenChildrenError(f"{self.branch_path} has open child branches: {names}")
            self._run_close_hooks()
            parent = self.parent.parent_view()
            with tree.commit_lock():
                if self.is_stale:
                    self._abort_locked()
                    raise ConflictError(
                        f"{self.branch_path} lost: a sibling already committed into "
                        f"{self.parent.branch_path}; this branch was aborted",
                        stale=True,
                    )
                _notify(tree.before_commit, self)
                _keep_git_commits(self, parent.root)
                backend = tree.backend
                backend.freeze(self._layout)
                try:
                    ops = self._checked(self._collect(parent), parent.root, keep_privileges)
                    if on_ready is not None:
                        on_ready(ops, parent.root)
                    journal = Journal.prepare(
                        store.journal_dir,
                        store.new_branch_id(),
                        parent_id=self.parent.node_id,
                        parent_root=parent.root,
                        ops=ops,
                        generation=store.generation(self.parent.node_id) + 1,
                        branch_id=self.node_id,
                    )
                except OSError as exc:
                    backend.thaw(self._layout, parent)
                    raise CommitError(
                        f"cannot commit {self.branch_path}: {exc}; nothing was applied"
                    ) from exc
                except BaseException:
                    backend.thaw(self._layout, parent)
                    raise
                self._publish(journal, parent)

    def note_replacing(self, rel: str) -> None:
        """Say that a writer is about to replace ``rel`` (relative to the branch root) by
        temp file + rename, as the agent's ``write_file``/``edit_file`` do.

        Overlay keeps no record of what the parent held: a file renamed over one of the
        parent's looks exactly like a file the branch created. The parent's side answers
        for forkdeck's own landings (``workspace.landed``), not for a hand deletion in a
        directory changed since the fork; called before the rename, this says the path
        existed, so that deletion is a conflict too (writers outside forkdeck cannot
        call it: see ``changes._may_have_existed``).
        """
        with self._lock:
            if self._state != "open" or rel in self._replaced_parent_paths:
                return
            if self.tree.backend.unchanged_from_parent(self._layout, rel):
                self._replaced_parent_paths.add(rel)

    def _collect(self, parent: ParentView) -> list[Op]:
        """The backend's ops, less internal paths (``paths.is_internal_path``): those are
        never changes, whatever a backend saw (a new tree holding a ``.git`` is split,
        ``changes.without_internal``); a put of a path ``note_replacing`` named existed."""
        ops = without_internal(self.tree.backend.collect(self._layout, parent))
        if not self._replaced_parent_paths:
            return ops
        return [
            replace(op, existed=True)
            if op.kind == "put" and not op.tree and op.path in self._replaced_parent_paths
            else op
            for op in ops
        ]

    def _landings(self) -> LandingRecord:
        """The parent's record of its own landings since (``workspace.landed``): how the
        conflict rule judges a path this branch writes that the parent no longer has and
        that the backend cannot say was there at the fork (overlay, every writer)."""
        return LandingRecord.of(self.tree.store.root, self.parent.node_id)

    def _checked(self, ops: list[Op], parent_root: Path, keep_privileges: bool) -> list[Op]:
        """The landing rule (paths, links, special files, privileges, conflicts), refused
        before the commit starts."""
        return check_landing(
            ops,
            parent_root,
            since_ns=self.created_ns,
            root_names=self.root_names,
            landings=self._landings(),
            parent_name=self.parent.branch_path,
            since=f"{self.branch_path} was created",
            cannot=f"commit {self.branch_path}",
            what=self.branch_path,
            keep_privileges=keep_privileges,
        )

    def _publish(self, journal: Journal, parent: ParentView) -> None:
        """From the commit point on: finish the journal before anything else happens.

        Terminal signals are held until the journal is finished (rolled forward, or
        rolled back from what it displaced); an exception raised inside is held too and
        re-raised after. The branch is only disposed once its sources are no longer
        needed: a journal left pending keeps it (state ``pending``) for the replay.
        """
        store = self.tree.store
        with deferred_signals():
            held = journal.reach_commit_point(
                lambda: self.tree.backend.thaw(self._layout, parent),
                f"cannot commit {self.branch_path}",
            )
            outcome = journal.run(store.set_generation, first=True)
            held = held or outcome.interrupt
            if outcome.pending:
                self._state = "pending"
                cause = outcome.errors[-1] if outcome.errors else "repeated interruptions"
                error: BaseException = CommitError(
                    f"commit of {self.branch_path} interrupted by {cause}; "
                    "it will be finished when the workspace is next opened"
                )
            elif outcome.rolled_back:
                self.tree.backend.thaw(self._layout, parent)
                error = CommitError(
                    f"commit of {self.branch_path} failed ({outcome.errors[0]}) and was "
                    f"rolled back; nothing was applied and {self.branch_path} is still open"
                )
            else:
                self._state = "committed"
                self.landed_paths = sorted({op.path for op in journal.ops})
                self._dispose()
                _notify(self.tree.after_commit, self, self.landed_paths)
                if held is not None:
                    raise held
                return
            if held is not None:
                raise held from error
            raise error

    def abort(self) -> None:
        """Throw this branch (and any open children) away; the parent never sees it."""
        with self._lock:
            self._require_open()
            self._abort_locked()

    def _abort_locked(self) -> None:
        Branch.abort_held([self])

    @staticmethod
    def abort_held(branches: list[Branch]) -> None:
        """Abort open siblings whose locks the caller holds (``hold()``; what
        ``abort_many`` of their parent does once it checked them): their open children first
        (a batch per parent), then every view in one backend call."""
        if not branches:
            return
        for branch in branches:
            kids = [child for child in branch.children if child.is_open]
            if kids:
                branch.abort_many(kids)
        for branch in branches:
            branch._state = "aborted"
        try:
            Branch._dispose_many(branches)
        except OSError as exc:
            names = ", ".join(b.branch_path for b in branches)
            raise AbortError(f"aborting {names} failed: {exc}") from exc

    def _dispose(self) -> None:
        Branch._dispose_many([self])

    @staticmethod
    def _dispose_many(branches: list[Branch]) -> None:
        """Destroy the views (one backend call), then forget the branches everywhere,
        even when destroying failed (their state is already final)."""
        tree = branches[0].tree
        for branch in branches:
            branch._run_close_hooks()
        try:
            tree.backend.destroy_many([b._layout for b in branches])
        finally:
            for branch in branches:
                # a generation file exists only once a child committed into the branch
                # (a reopened durable branch may have one from its earlier life)
                if branch._had_children or branch.durable:
                    crash_point("dropping-generation")
                    tree.store.drop_generation(branch.node_id)
                branch.parent._forget_child(branch)
                tree.unregister(branch)

    def close_for_exit(self) -> None:
        """Interpreter exit: ordinary branches are aborted, durable ones just unmounted.

        Waits for a commit running in another thread (it holds the lock) so a branch is
        never thrown away under a commit that is publishing it.
        """
        if not self._lock.acquire(timeout=EXIT_WAIT_S):
            log.warning("%s is still busy at exit; left for recovery", self.branch_path)
            return
        try:
            self._run_close_hooks()
            if not self.is_open:
                return
            if self.durable:
                self.tree.backend.freeze(self._layout)
            else:
                self._abort_locked()
        finally:
            self._lock.release()

    # -- what lives with the branch (services, networks) --------------------------------------
    def add_close_hook(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` once when this branch closes: before a commit freezes it (so a
        service writing into the branch, a database, has stopped and flushed), at abort,
        and at exit. A failing hook is logged, never blocks the close. On a branch that
        has already closed, ``hook`` runs at once."""
        with self._lock:  # not between a close's hooks and its final state
            if self.is_open:
                self._close_hooks.append(hook)
                return
        hook()

    def _run_close_hooks(self) -> None:
        hooks, self._close_hooks = self._close_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception as exc:
                log.warning("closing %s: %s", self.branch_path, exc)

    # -- context manager ----------------------------------------------------------------------
    def __enter__(self) -> Branch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.is_open:
            return
        if exc_type is not None:
            # on_error="abort" is the default; with on_error=None the block had its chance
            # to decide, and an open branch is never left behind either way.
            self.abort()
            return
        if self.on_success == "commit":
            try:
                self.commit()
            except BaseException:
                if self.is_open:
                    self.abort()
                raise
        elif self.is_open:
            # Manual control that neither committed nor aborted: never leave a branch behind.
            log.info("aborting %s: the block ended without commit() or abort()", self.branch_path)
            self.abort()

    def __repr__(self) -> str:
        return f"<Branch {self.branch_path} {self._state} at {self._layout.view}>"


# what land_files and the workspace take: a workspace or a branch, anything one lands into
Node = BranchNode

__all__ = ["Branch", "BranchNode", "Node", "WorkspaceBranchState"]
