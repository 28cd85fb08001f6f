"""Fork state on disk: the manifest and branch histories written as branches step
(coalesced, off the event loop), and rebuilding coordinators from them after a restart
(:meth:`recover`), after sweeping what an interrupted ``fork()`` left.

A mixin of :class:`~branching_core.fork.coordinator.ForkCoordinator`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, cast

from pydantic_ai.messages import ModelMessage

from branching_core.atomicio import is_atomic_temp
from branching_core.errors import error_name
from branching_core.fork.branch_files import HOSTED_LOST, is_hosted_id
from branching_core.fork.budget import UsageMeter
from branching_core.fork.history import dumps_history, load_history
from branching_core.fork.mirror import recover_mirrors
from branching_core.fork.options import ForkOptions
from branching_core.fork.parts import CoordinatorParts
from branching_core.fork.retention import prune_resolved
from branching_core.fork.runtime import (
    INTERRUPTED,
    BranchRuntime,
    as_workspace,
)
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


class Persistence(CoordinatorParts):
    """Saving and recovering fork state (mixin of ``ForkCoordinator``)."""

    def _manifest(self) -> dict[str, Any]:
        handle = self._require_handle()
        return {
            "fork_id": handle.fork_id,
            "created_at": handle.created_at,
            "depth": handle.depth,
            "parent_workspace_branch_id": self._parent_ws_id(),
            "parent_branch_id": handle.parent_branch_id,
            "parent_fork_id": self.parent_coordinator.fork_id if self.parent_coordinator else None,
            "resolved": self._resolved,
            "resolution": self._resolution,
            "resolved_at": self._resolved_at,
            "aggregate_budget_usd": handle.aggregate_budget_usd,
            "isolation": asdict(handle.isolation),
            "strategy": asdict(handle.merge_strategy),
            "max_branches": self.max_branches,
            "max_depth": self.max_depth,
            "pre_fork_checkpoint_id": handle.parent_checkpoint_id,
            "post_fork_checkpoint_id": self._post_checkpoint,
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
                for rt in self._branches.values()
            ],
        }

    def _persist(self, *, durable: bool = False, now: bool = False) -> None:
        """Save the manifest: at once (``now``/``durable``) or through the background writer."""
        if self._handle is None:
            return
        if now or durable:
            self._writer.pending.pop((self._handle.fork_id, "manifest"), None)
            self.store.write_manifest(self._manifest(), durable=durable)
        else:
            self._writer.submit(self._handle.fork_id, "manifest", self._manifest())

    def _prune_later(self) -> None:
        """Apply the retention policy (fork/retention.py) in a worker thread, after the
        checkpoint recording under way (``flush()`` waits for it)."""
        keep = self.options.keep_resolved
        pending = list(self._background)

        async def prune() -> None:
            if pending:
                await asyncio.wait(pending)
            await asyncio.to_thread(prune_resolved, self.store, keep)

        task = asyncio.get_running_loop().create_task(prune())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _persist_durable(self) -> None:
        """Save the manifest with fsync, in a worker thread (an fsync can take a while)."""
        if self._handle is not None:
            self._writer.pending.pop((self._handle.fork_id, "manifest"), None)
            await asyncio.to_thread(self.store.write_manifest, self._manifest(), durable=True)

    def _save_history(self, rt: BranchRuntime) -> None:
        """Queue ``rt``'s history for the writer; a failure is reported, never raised (a
        history that cannot be saved must not end the branch or skip its manifest)."""
        if self._handle is None:
            return
        try:
            payload = dumps_history(rt.history)
        except Exception as exc:
            self._save_failed(self._handle.fork_id, rt.branch_id, exc)
            return
        self._writer.submit(self._handle.fork_id, rt.branch_id, payload)

    def _persist_or_report(self, rt: BranchRuntime | None = None) -> None:
        """:meth:`_persist`, reporting a failure instead of raising it."""
        try:
            self._persist()
        except Exception as exc:
            self._save_failed(self.fork_id or "", "manifest", exc, rt)

    def _save_failed(
        self, fork_id: str, name: str, exc: BaseException, rt: BranchRuntime | None = None
    ) -> None:
        """Log a failed save and show it: on its branch (``save_error``, a history) or on
        ``rt``/every branch (the manifest), and in :attr:`save_errors`."""
        what = "the fork manifest" if name == "manifest" else f"the history of {name}"
        message = f"cannot save {what} of fork {fork_id}: {error_name(exc)}: {exc}"
        log.error("%s", message)
        self.save_errors.append(message)
        if name != "manifest":
            targets = [r for r in self._branches.values() if r.branch_id == name]
        else:
            targets = [rt] if rt is not None else list(self._branches.values())
        for target in targets:
            target.save_error = message

    async def rewind_to_checkpoint(self, checkpoint_id: str) -> list[ModelMessage]:
        """Restore ``fork:<id>`` / ``post-fork:<id>`` (files + history) into the parent."""
        await self.flush()
        return await asyncio.to_thread(self.checkpoints.rewind, checkpoint_id, self.parent_path)

    async def flush(self) -> None:
        """Wait until every state change (and post-fork checkpoint) so far is on disk."""
        await self._writer.flush()
        while self._background:
            await asyncio.wait(list(self._background))

    async def release_networks(self) -> None:
        """End every branch's network, services and port forwards now, keeping the fork
        (for a front end that leaves it open for recovery: no process outlives it)."""
        networks = getattr(self.branch_files, "networks", None)
        if networks is not None:
            await asyncio.to_thread(networks.close_all)

    # -- recovery ------------------------------------------------------------------------------
    @classmethod
    def recover(
        cls,
        workspace: Workspace | str | os.PathLike[str],
        agent: Any = None,
        *,
        options: ForkOptions | None = None,
        **option_overrides: Any,
    ) -> list[Self]:
        """Rebuild a coordinator for every fork left open under ``workspace`` (e.g. after a crash).

        Branches that were running when their process died become ``terminated`` (their
        error says why); every branch keeps its partial history and its durable workspace
        branch, so the fork can be inspected, continued (:meth:`run_on_branch`), merged or
        aborted. Outer forks are recovered before the forks nested in their branches.
        ``options`` (and keyword overrides of its fields) apply to every recovered fork;
        each keeps the branch and depth limits its manifest recorded.
        """
        base = ForkOptions.build(options, **option_overrides)
        ws = as_workspace(workspace)
        store = ForkStore(ws.path)
        sweep_interrupted_forks(ws, store)
        prune_resolved(store, base.keep_resolved)
        by_branch: dict[str, tuple[Self, BranchRuntime]] = {}
        out: list[Self] = []
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
                    parent_coordinator=cast("ForkCoordinator", owner[0]) if owner else None,
                    options=replace(
                        base,
                        max_branches=int(manifest.get("max_branches", base.max_branches)),
                        max_depth=int(manifest.get("max_depth", base.max_depth)),
                    ),
                )
                coord._restore(manifest)
            except Exception as exc:  # one broken fork must not hide the others
                log.warning("cannot recover fork %s: %s", manifest.get("fork_id"), exc)
                continue
            if owner is not None:
                owner[1].child = cast("ForkCoordinator", coord)
            for rt in coord._branches.values():
                by_branch[rt.branch_id] = (coord, rt)
            out.append(coord)
        if base.materialize:  # rebuild or clean mirrors a killed process left
            recover_mirrors(ws, out, keep_artifacts=base.keep_artifacts)
        return out

    def _restore(self, manifest: dict[str, Any]) -> None:
        fork_id = manifest["fork_id"]
        parent_json = self.store.read_history(fork_id, "parent")
        seed = load_history(parent_json) if parent_json else []
        runtimes = []
        for data in manifest["branches"]:
            spec = BranchSpec.from_json(data["spec"])
            state = data["state"]
            error = data.get("error")
            if state == "running":
                state, error = "terminated", INTERRUPTED
            ws_branch = None
            hosted = is_hosted_id(data.get("workspace_branch_id"))
            if data.get("resolution") is None and hosted:
                state, error = "failed", HOSTED_LOST
                self.recovery_errors.append(f"{data['label']}: {HOSTED_LOST}")
            elif data.get("resolution") is None and data.get("workspace_branch_id"):
                try:
                    ws_branch = self.workspace.open_branch(data["workspace_branch_id"])
                except Exception as exc:
                    self.recovery_errors.append(f"{data['label']}: workspace branch lost ({exc})")
                else:
                    _drop_torn_writes(ws_branch)
            raw = self.store.read_history(fork_id, data["branch_id"])
            rt = BranchRuntime(
                branch_id=data["branch_id"],
                label=data["label"],
                spec=spec,
                index=int(data.get("index", len(runtimes))),
                depth=int(manifest.get("depth", 1)),
                ws_branch=ws_branch,
                workspace_branch_id=data.get("workspace_branch_id"),
                path=Path(ws_branch.path) if ws_branch is not None else None,
                state=state,
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
            runtimes.append(rt)
        self._branches = {rt.branch_id: rt for rt in runtimes}
        self._handle = ForkHandle(
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
        self._resolved = bool(manifest.get("resolved"))
        self._resolution = manifest.get("resolution")
        self._resolved_at = manifest.get("resolved_at")
        self._persist(durable=True)


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
