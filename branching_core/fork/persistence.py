"""Fork state on disk: the manifest and branch histories written as branches step
(coalesced, off the event loop; :class:`ForkRecorder`), and rebuilding coordinators from
them after a restart (:func:`recover_forks`), after sweeping what an interrupted
``fork()`` left.

Why a recorder of its own: it owns the writer, the background checkpoint tasks and the
list of failed saves, so the run loop, the merger and :meth:`ForkState.settle` share one
object instead of reaching into the coordinator's fields."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_ai.messages import ModelMessage

from branching_core.atomicio import is_atomic_temp
from branching_core.errors import error_name
from branching_core.fork.branch_files import HOSTED_LOST, is_hosted_id
from branching_core.fork.budget import UsageMeter
from branching_core.fork.history import dumps_history, load_history
from branching_core.fork.mirror import recover_mirrors
from branching_core.fork.options import ForkOptions
from branching_core.fork.retention import prune_resolved
from branching_core.fork.runtime import (
    INTERRUPTED,
    BranchRuntime,
    as_workspace,
)
from branching_core.fork.state import ForkState
from branching_core.fork.state_writer import StateWriter
from branching_core.fork.store import ForkStore
from branching_core.fork.sweep import sweep_interrupted_forks
from branching_core.fork.types import (
    BranchIsolation,
    BranchSpec,
    ForkHandle,
    MergeStrategy,
)
from branching_core.workspace import Workspace

if TYPE_CHECKING:
    from branching_core.fork.coordinator import ForkCoordinator

log = logging.getLogger(__name__)

C = TypeVar("C", bound="ForkCoordinator")


def build_manifest(
    state: ForkState,
    *,
    parent_workspace_branch_id: str | None,
    parent_fork_id: str | None,
    max_branches: int,
    max_depth: int,
) -> dict[str, Any]:
    """What ``manifest.json`` holds for ``state``'s fork (the format older versions read)."""
    handle = state.require_handle()
    return {
        "fork_id": handle.fork_id,
        "created_at": handle.created_at,
        "depth": handle.depth,
        "parent_workspace_branch_id": parent_workspace_branch_id,
        "parent_branch_id": handle.parent_branch_id,
        "parent_fork_id": parent_fork_id,
        "resolved": state.resolved,
        "resolution": state.resolution_text,
        "resolved_at": state.resolved_at,
        "aggregate_budget_usd": handle.aggregate_budget_usd,
        "isolation": asdict(handle.isolation),
        "strategy": asdict(handle.merge_strategy),
        "max_branches": max_branches,
        "max_depth": max_depth,
        "pre_fork_checkpoint_id": handle.parent_checkpoint_id,
        "post_fork_checkpoint_id": state.post_checkpoint,
        "pid": os.getpid(),
        "branches": [
            {
                "branch_id": rt.branch_id,
                "label": rt.label,
                "index": rt.index,
                "spec": rt.spec.to_json(),
                "state": rt.state,
                "resolution": rt.resolution,
                "workspace_branch_id": rt.workspace_branch_id,
                "error": rt.error,
                "output": rt.output,
                "meter": rt.meter.to_json(),
                "tool_calls": rt.tool_calls,
                "turns": rt.turns,
                "started_at": rt.started_at,
                "finished_at": rt.finished_at,
                "history": f"history/{rt.branch_id}.json",
            }
            for rt in state.branches.values()
        ],
    }


class ForkRecorder:
    """Saves one coordinator's fork state: the manifest (now, durably, or coalesced through
    the background :class:`StateWriter`), branch histories, the background checkpoint
    copies, and the retention policy after a fork settles.

    ``manifest`` builds the current manifest (None before the first fork); ``branches``
    lists the branches a failed save is shown on; ``keep_resolved`` is read at each prune
    (the owner's options may be replaced after construction)."""

    def __init__(
        self,
        store: ForkStore,
        *,
        manifest: Callable[[], dict[str, Any] | None],
        branches: Callable[[], Iterable[BranchRuntime]],
        keep_resolved: Callable[[], int | str | None],
    ) -> None:
        self.store = store
        self._manifest = manifest
        self._branches = branches
        self._keep_resolved = keep_resolved
        self.save_errors: list[str] = []
        """Every failed save of fork state (each is also logged and set on its branch)."""
        self.writer = StateWriter(store, self.save_failed)
        self.background: set[asyncio.Task[Any]] = set()
        """Checkpoint copies and prunes under way (``flush()`` waits for them)."""

    def persist(self, *, durable: bool = False, now: bool = False) -> None:
        """Save the manifest: at once (``now``/``durable``) or through the background writer."""
        manifest = self._manifest()
        if manifest is None:
            return
        if now or durable:
            self.writer.pending.pop((manifest["fork_id"], "manifest"), None)
            self.store.write_manifest(manifest, durable=durable)
        else:
            self.writer.submit(manifest["fork_id"], "manifest", manifest)

    async def persist_durable(self) -> None:
        """Save the manifest with fsync, in a worker thread (an fsync can take a while)."""
        manifest = self._manifest()
        if manifest is not None:
            self.writer.pending.pop((manifest["fork_id"], "manifest"), None)
            await asyncio.to_thread(self.store.write_manifest, manifest, durable=True)

    async def save_settled(self) -> None:
        """A fork settled: every pending write, then the manifest, made durable in the
        background (``flush()`` waits for it).

        The new manifest is in place (renamed over the old one) when this returns, so a
        reader, or a process recovering after this one is killed, sees the settled fork at
        once; only its fsyncs (file and directory, two disk flushes that take 5-15 ms each
        on a busy disk) are left to a worker, so a merge does not wait on them. A power cut
        before they finish leaves the fork recorded as open with its winner committed: the
        state a power cut between the commit and the manifest write always could leave,
        which recovery handles."""
        await self.writer.flush()
        manifest = self._manifest()
        if manifest is None:
            return
        fork_id = manifest["fork_id"]
        self.writer.pending.pop((fork_id, "manifest"), None)
        await asyncio.to_thread(self.store.write_manifest, manifest)

        async def sync() -> None:
            try:
                await asyncio.to_thread(self.store.sync_manifest, fork_id)
            except OSError as exc:  # reported like any failed save, never raised later
                self.save_failed(fork_id, "manifest", exc)

        self.track(asyncio.get_running_loop().create_task(sync()))

    def track(self, task: asyncio.Task[Any]) -> None:
        """Keep ``task`` (a checkpoint copy) until it is done; ``flush()`` waits for it."""
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def prune_later(self) -> None:
        """Apply the retention policy (fork/retention.py) in a worker thread, after the
        checkpoint recording under way (``flush()`` waits for it)."""
        keep = self._keep_resolved()
        pending = list(self.background)

        async def prune() -> None:
            if pending:
                await asyncio.wait(pending)
            await asyncio.to_thread(prune_resolved, self.store, keep)

        self.track(asyncio.get_running_loop().create_task(prune()))

    def save_history(self, fork_id: str | None, rt: BranchRuntime) -> None:
        """Queue ``rt``'s history for the writer; a failure is reported, never raised (a
        history that cannot be saved must not end the branch or skip its manifest)."""
        if fork_id is None:
            return
        try:
            payload = dumps_history(rt.history)
        except Exception as exc:
            self.save_failed(fork_id, rt.branch_id, exc)
            return
        self.writer.submit(fork_id, rt.branch_id, payload)

    def persist_or_report(self, rt: BranchRuntime | None = None) -> None:
        """:meth:`persist`, reporting a failure instead of raising it."""
        try:
            self.persist()
        except Exception as exc:
            manifest_id = ""
            with contextlib.suppress(Exception):
                manifest_id = str((self._manifest() or {}).get("fork_id", ""))
            self.save_failed(manifest_id, "manifest", exc, rt)

    def save_failed(
        self, fork_id: str, name: str, exc: BaseException, rt: BranchRuntime | None = None
    ) -> None:
        """Log a failed save and show it: on its branch (``save_error``, a history) or on
        ``rt``/every branch (the manifest), and in :attr:`save_errors`."""
        what = "the fork manifest" if name == "manifest" else f"the history of {name}"
        message = f"cannot save {what} of fork {fork_id}: {error_name(exc)}: {exc}"
        log.error("%s", message)
        self.save_errors.append(message)
        if name != "manifest":
            targets = [r for r in self._branches() if r.branch_id == name]
        else:
            targets = [rt] if rt is not None else list(self._branches())
        for target in targets:
            target.save_error = message

    async def flush(self) -> None:
        """Wait until every state change (and post-fork checkpoint) so far is on disk."""
        await self.writer.flush()
        while self.background:
            await asyncio.wait(list(self.background))


# -- recovery ----------------------------------------------------------------------------------
def recover_forks(
    cls: type[C],
    workspace: Workspace | str | os.PathLike[str],
    agent: Any = None,
    *,
    options: ForkOptions | None = None,
    **option_overrides: Any,
) -> list[C]:
    """``ForkCoordinator.recover``: a coordinator of class ``cls`` per open fork."""
    base = ForkOptions.build(options, **option_overrides)
    ws = as_workspace(workspace)
    store = ForkStore(ws.path)
    sweep_interrupted_forks(ws, store)
    prune_resolved(store, base.keep_resolved)
    by_branch: dict[str, tuple[C, BranchRuntime]] = {}
    out: list[C] = []
    for manifest in store.list_open():
        try:
            parent_ws_id = manifest.get("parent_workspace_branch_id")
            parent_node = ws if not parent_ws_id else ws.open_branch(parent_ws_id)
            owner = by_branch.get(manifest.get("parent_branch_id") or "")
            coord = cls(
                agent,
                workspace=ws,
                parent_node=parent_node,
                depth=int(manifest.get("depth", 1)) - 1,
                store=store,
                parent_runtime=owner[1] if owner else None,
                parent_coordinator=owner[0] if owner else None,
                options=replace(
                    base,
                    max_branches=int(manifest.get("max_branches", base.max_branches)),
                    max_depth=int(manifest.get("max_depth", base.max_depth)),
                ),
            )
            coord.recovery_errors.extend(restore_fork(coord.state, manifest, ws, store))
            coord.recorder.persist(durable=True)
        except Exception as exc:  # one broken fork must not hide the others
            log.warning("cannot recover fork %s: %s", manifest.get("fork_id"), exc)
            continue
        if owner is not None:
            owner[1].child = coord
        for rt in coord.state.branches.values():
            by_branch[rt.branch_id] = (coord, rt)
        out.append(coord)
    if base.materialize:  # rebuild or clean mirrors a killed process left
        recover_mirrors(ws, out, keep_artifacts=base.keep_artifacts)
    return out


def restore_fork(
    state: ForkState, manifest: dict[str, Any], workspace: Workspace, store: ForkStore
) -> list[str]:
    """Rebuild ``state`` from ``manifest``; returns what could not be recovered."""
    errors: list[str] = []
    fork_id = manifest["fork_id"]
    parent_json = store.read_history(fork_id, "parent")
    seed: list[ModelMessage] = load_history(parent_json) if parent_json else []
    runtimes: list[BranchRuntime] = []
    for data in manifest["branches"]:
        spec = BranchSpec.from_json(data["spec"])
        branch_state = data["state"]
        error = data.get("error")
        if branch_state == "running":
            branch_state, error = "terminated", INTERRUPTED
        ws_branch = None
        hosted = is_hosted_id(data.get("workspace_branch_id"))
        if data.get("resolution") is None and hosted:
            branch_state, error = "failed", HOSTED_LOST
            errors.append(f"{data['label']}: {HOSTED_LOST}")
        elif data.get("resolution") is None and data.get("workspace_branch_id"):
            try:
                ws_branch = workspace.open_branch(data["workspace_branch_id"])
            except Exception as exc:
                errors.append(f"{data['label']}: workspace branch lost ({exc})")
            else:
                _drop_torn_writes(ws_branch)
        raw = store.read_history(fork_id, data["branch_id"])
        runtimes.append(
            BranchRuntime(
                branch_id=data["branch_id"],
                label=data["label"],
                spec=spec,
                index=int(data.get("index", len(runtimes))),
                depth=int(manifest.get("depth", 1)),
                ws_branch=ws_branch,
                workspace_branch_id=data.get("workspace_branch_id"),
                path=Path(ws_branch.path) if ws_branch is not None else None,
                state=branch_state,
                resolution=data.get("resolution"),
                history=load_history(raw) if raw else list(seed),
                seed_history=seed,
                meter=UsageMeter.from_json(data.get("meter")),
                error=error,
                output=data.get("output"),
                started_at=data.get("started_at"),
                finished_at=data.get("finished_at"),
                tool_calls=int(data.get("tool_calls", 0)),
                turns=int(data.get("turns", 1)),
            )
        )
    handle = ForkHandle(
        fork_id=fork_id,
        branches=[rt.branch_id for rt in runtimes],
        labels={rt.branch_id: rt.label for rt in runtimes},
        depth=int(manifest.get("depth", 1)),
        parent_checkpoint_id=manifest.get("pre_fork_checkpoint_id"),
        merge_strategy=MergeStrategy(**manifest.get("strategy", {})),
        isolation=BranchIsolation(**manifest.get("isolation", {})),
        aggregate_budget_usd=manifest.get("aggregate_budget_usd"),
        parent_branch_id=manifest.get("parent_branch_id"),
        created_at=float(manifest.get("created_at", 0.0)),
    )
    state.restore(
        handle,
        runtimes,
        resolved=bool(manifest.get("resolved")),
        resolution=manifest.get("resolution"),
        resolved_at=manifest.get("resolved_at"),
        post_checkpoint=manifest.get("post_fork_checkpoint_id"),
    )
    return errors


def list_open_forks(workspace: Workspace | str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The manifests of forks not yet merged or aborted (no coordinator is built).

    Given an open ``Workspace`` (what a starting app has), it first drops what a process
    killed inside ``fork()`` left (fork/sweep.py): never anything of a live process."""
    if isinstance(workspace, Workspace):
        store = ForkStore(workspace.path)
        try:
            sweep_interrupted_forks(workspace, store)
        except Exception as exc:  # listing must work even when sweeping cannot
            log.warning("cannot sweep interrupted forks: %s", exc)
        return store.list_open()
    return ForkStore(Path(workspace)).list_open()


def _drop_torn_writes(ws_branch: Any) -> list[str]:
    """Remove what a process killed inside an atomic write left in a recovered branch.

    ``write_file`` writes a temp file and renames it over the target; a kill between the
    two leaves the temp file (never a torn target), which a merge would otherwise land in
    the user's project. Only paths the branch created are looked at, so the cost is that
    of the branch's own changes, not of the tree."""
    dropped = []
    for rel in ws_branch.changes().created:
        if is_atomic_temp(os.path.basename(rel)):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(Path(ws_branch.path) / rel)
                dropped.append(rel)
    return dropped
