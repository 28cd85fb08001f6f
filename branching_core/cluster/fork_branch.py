"""The driver side of a fork branch on the cluster: ``RemoteForkBranch``.

``ForkCoordinator(..., runner=RayRunner())`` keeps every branch's model loop in the
driver; only the branch's files live on a node, in a ``fork_actor.BranchHost`` actor.
Per fork the driver ships the parent once (the same content-addressed snapshot as the
pattern runner), starts one actor per branch (spread over the nodes) and hands the fork
layer one ``RemoteForkBranch`` per branch. It offers what the fork layer uses of a local
workspace ``Branch``:

* ``call_tool(name, kwargs)``: one tool call, run by the actor on the node;
* ``path``: a directory on *this* machine showing the branch's files (a non-durable
  local branch of the parent, the "view"), brought up to date from the actor's delta by
  ``sync()`` whenever something reads it: ``changes()`` (the diff report, the merge,
  ``file_changes``), or after every tool call that writes when ``live_view`` is on (the
  on-disk mirror follows the view);
* ``branch(name)``: a local child of the refreshed view (where the judge's branch tests
  run, on this machine);
* ``commit()``: pulls the delta and lands it through the normal journaled commit with
  the conflict check against the snapshot (``delta.apply``): a path changed in the parent
  since the fork and by the branch is a ``ConflictError`` naming it, nothing applied (the
  fork's merge then applies the other paths one by one, as for a local branch);
* ``abort()``: closes the actor (its branch aborted, nothing left mounted on the node),
  kills it and drops the view.

A branch whose actor or node dies raises ``BranchLost`` from its next tool call, so its
run ends ``failed`` with that reason; nothing is retried behind the model's back.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core.cluster import delta as delta_mod
from branching_core.cluster.fork_actor import BranchHost, MakeTools
from branching_core.cluster.snapshot import Snapshot
from branching_core.cluster.task import ShippedSnapshot
from branching_core.errors import BranchingError, ConflictError, UnsupportedError, error_name
from branching_core.workspace.changes import BranchChanges

if TYPE_CHECKING:
    from branching_core.cluster.runner import RayRunner
    from branching_core.workspace.branch import Branch, OnError, OnSuccess
    from branching_core.workspace.workspace import Workspace

WRITING_TOOLS = frozenset({"write_file", "edit_file", "delete_file", "run_command"})
UNREACHABLE_AFTER = 60.0
"""Seconds a branch's actor may stay unreachable before the branch is given up as lost."""
CLOSE_WITHIN = 15.0
"""Seconds an actor gets to abort its branch before it is killed regardless."""
ACTOR_PREFIX = "forkdeck-branch:"
"""Every branch actor is named ``forkdeck-branch:<workspace branch name>`` (so a leftover
one is easy to find with ``ray.util.list_named_actors(all_namespaces=True)``)."""


class BranchLost(BranchingError):
    """A fork branch's actor (or its node) died: the branch's files on the node are gone."""


class RemoteForkBranch:
    """One fork branch whose files live in a Ray actor (see the module docstring)."""

    is_stale = False
    """Conflicts are checked against the snapshot at commit (``delta.apply``), never by
    the parent's first-winner rule."""

    def __init__(self, runner: RayRunner, parent: Workspace | Branch, snapshot: Snapshot,
                 shipped: ShippedSnapshot, name: str, make_tools: MakeTools,
                 *, live_view: bool = False) -> None:
        self.runner = runner
        self.parent = parent
        self.name = name
        self.id = f"ray:{name}"
        self.live_view = live_view
        self.snapshot = snapshot
        self._ray = runner.ray
        self._sync_lock = threading.Lock()  # one sync or close at a time
        self._view = parent.branch(f"{name}-view", on_success=None, on_error=None)
        self.created_ns: int = self._view.created_ns
        self._shown: set[str] = set()
        self._delta = delta_mod.Delta()
        self._node: str | None = None
        self.materialised = False
        self.worker_pid: int | None = None
        """The actor's process id on its node (known once ``cluster_node_id`` is)."""
        self._state = "open"
        self.stats = {"tool_calls": 0, "syncs": 0}
        try:
            actor_cls = runner.branch_actor_class()
            self._actor: Any = actor_cls.options(
                name=f"{ACTOR_PREFIX}{name}", **runner.actor_options()
            ).remote(shipped, name, make_tools)
        except BaseException:
            self._view.abort()
            raise

    # -- what the fork layer reads -------------------------------------------------------
    @property
    def path(self) -> Path:
        return Path(self._view.path)

    @property
    def is_open(self) -> bool:
        return self._state == "open"

    @property
    def write_layer(self) -> Path:
        """Where this branch's files show in the driver: its local view (the mirror reads
        the branch's own writes here, as for a local branch)."""
        return self._view.write_layer

    @contextlib.contextmanager
    def hold(self) -> Generator[bool, None, None]:
        """Hold the local view (as ``Branch.hold``); yields False once the branch is closed."""
        with self._view.hold() as view_open:
            yield view_open and self.is_open

    @property
    def cluster_node_id(self) -> str | None:
        """The node the branch's files live on (waits for the actor to start)."""
        if self._node is None and self._actor is not None:
            with contextlib.suppress(Exception):
                self._node, self.materialised, self.worker_pid = self._ray.get(
                    self._actor.ready.remote(), timeout=120)
        return self._node

    async def call_tool(self, tool: str, kwargs: dict[str, Any]) -> Any:
        """Run ``tool`` on the node; a failure the tool reports is raised here as is."""
        actor = self._require_actor()
        self.stats["tool_calls"] += 1
        ref = actor.call.remote(tool, kwargs)
        exceptions = self._ray.exceptions
        try:
            ok, value = await ref
        except exceptions.ActorUnavailableError as exc:
            # The call did not come back and may or may not have run. A dead node shows
            # this way first; a network blip too. Tell them apart before saying either.
            if await self._unreachable():
                raise self._lost(exc) from None
            from pydantic_ai import ToolFailed  # (the pattern runner never needs pydantic-ai)

            raise ToolFailed(
                f"{tool}: the call to this branch's node did not come back "
                f"({error_name(exc)}); it may or may not have run: check before repeating"
            ) from None
        except exceptions.RayError as exc:
            raise self._lost(exc) from None
        except asyncio.CancelledError:
            # The branch was terminated mid-call: cancel the call on the node too (the
            # actor's coroutine is cancelled, so a sandboxed command is killed there, as a
            # cancelled local call kills it here).
            with contextlib.suppress(Exception):
                self._ray.cancel(ref)
            raise
        if not ok:
            raise value
        if self.live_view and tool in WRITING_TOOLS:
            await asyncio.to_thread(self.sync)
        return value

    def sync(self) -> delta_mod.Delta:
        """Pull the branch's delta from its actor and make the local view show it."""
        with self._sync_lock:
            actor = self._require_actor()
            try:
                delta = self._ray.get(actor.delta.remote())
                undone = sorted(self._shown - set(delta.paths()))
                base = self._ray.get(actor.base.remote(undone)) if undone else None
            except self._ray.exceptions.RayError as exc:
                raise self._lost(exc) from None
            view = Path(self._view.path)
            if base is not None:
                delta_mod.write_into(view, base)
            delta_mod.write_into(view, delta)
            self._shown = set(delta.paths())
            self._delta = delta
            self.stats["syncs"] += 1
            return delta

    def changes(self) -> BranchChanges:
        delta = self.sync()
        manifest = self.snapshot.manifest
        written = {*delta.files, *delta.symlinks, *delta.dirs}
        return BranchChanges(
            created=sorted(p for p in written if p not in manifest),
            modified=sorted(p for p in written if p in manifest),
            deleted=sorted(p for p in delta.deleted if p not in written),
        )

    def branch(self, name: str, on_success: OnSuccess = None, on_error: OnError = None, *,
               durable: bool = False) -> Branch:
        """A local child of the up-to-date view (e.g. a scratch copy the judge runs a
        branch's tests in, on this machine); kept (not committed, not aborted) unless asked."""
        self.sync()
        return self._view.branch(name, on_success, on_error, durable=durable)

    def commit(self) -> None:
        """Land the branch's delta in the parent (journaled, all or nothing); a conflict
        with the parent leaves the branch open so the caller can apply path by path."""
        if self._state != "open":
            raise ConflictError(f"{self.name} is already {self._state}")
        delta = self.sync()
        delta_mod.apply(self.parent, delta, self.snapshot, name=f"{self.name}-land")
        self._state = "committed"
        self._shutdown()

    def abort(self) -> None:
        if self._state == "open":
            self._state = "aborted"
        self._shutdown()

    # -- plumbing ---------------------------------------------------------------------------
    def _require_actor(self) -> Any:
        if self._actor is None or self._state != "open":
            raise BranchLost(f"{self.name} is {self._state}: its actor is gone")
        return self._actor

    async def _unreachable(self) -> bool:
        """True when the actor is dead, or unanswering for ``UNREACHABLE_AFTER`` seconds."""
        loop = asyncio.get_running_loop()
        end = loop.time() + UNREACHABLE_AFTER
        exceptions = self._ray.exceptions
        while loop.time() < end:
            actor = self._actor
            if actor is None:
                return True
            try:
                await asyncio.wait_for(actor.ready.remote(), timeout=max(0.1, end - loop.time()))
                return False
            except exceptions.ActorUnavailableError:
                await asyncio.sleep(0.5)
            except (exceptions.RayError, TimeoutError):
                return True
        return True

    def _lost(self, exc: BaseException) -> BranchLost:
        text = str(exc).strip().splitlines()
        first = text[0][:300] if text else error_name(exc)
        where = f" on node {self._node}" if self._node else ""
        return BranchLost(f"its files are lost: its Ray actor{where} died or cannot be "
                          f"reached ({error_name(exc)}: {first})")

    def _shutdown(self) -> None:
        """Abort the branch on its node, kill the actor, drop the local view (idempotent)."""
        with self._sync_lock:
            actor, self._actor = self._actor, None
            if actor is not None:
                ray = self._ray
                with contextlib.suppress(Exception):
                    ray.get(actor.close.remote(), timeout=CLOSE_WITHIN)
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
            if self._view.is_open:
                self._view.abort()

    def __repr__(self) -> str:
        return f"RemoteForkBranch({self.name!r}, {self._state})"


def open_fork_branches(runner: RayRunner, parent: Workspace | Branch | RemoteForkBranch,
                       names: Sequence[str],
                       make_tools: MakeTools, *, live_view: bool = False
                       ) -> list[RemoteForkBranch]:
    """Ship ``parent`` (once per snapshot) and start one branch actor per name."""
    if isinstance(parent, RemoteForkBranch) or getattr(parent, "path", None) is None:
        raise UnsupportedError(
            "a fork nested in a branch that runs on the cluster is not supported: "
            "fork from the driver's workspace (or use the local runner)"
        )
    runner.connect()
    snapshot, shipped = runner.ship(Path(parent.path))
    made: list[RemoteForkBranch] = []
    try:
        for name in names:
            made.append(RemoteForkBranch(runner, parent, snapshot, shipped, name, make_tools,
                                         live_view=live_view))
    except BaseException:
        for branch in made:
            with contextlib.suppress(Exception):
                branch.abort()
        raise
    return made


__all__ = ["ACTOR_PREFIX", "BranchHost", "BranchLost", "RemoteForkBranch",
           "open_fork_branches"]
