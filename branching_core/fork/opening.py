"""Opening a fork: validating the specs, taking one durable workspace branch per spec,
the ``fork`` checkpoint, the first manifest, and starting every branch.

Why a module of its own: the crash-safe order of these steps (intent manifest, branches,
checkpoint, full manifest; see ``fork/sweep.py``) is one job, and it keeps the
coordinator a facade. It works on the coordinator's public surface (its ``state``,
``recorder`` and ``runner``)."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelMessage

from branching_core.errors import InvalidArgumentError, InvalidStateError
from branching_core.fork import events as ev
from branching_core.fork.history import copy_history, dumps_history
from branching_core.fork.runtime import BranchRuntime, ws_name
from branching_core.fork.types import (
    BranchIsolation,
    BranchSpec,
    ForkBranchLimitError,
    ForkDepthLimitError,
    ForkHandle,
    MergeStrategy,
)
from branching_core.workspace.journal import crash_point

if TYPE_CHECKING:
    from branching_core.fork.coordinator import ForkCoordinator


async def open_fork(
    fc: ForkCoordinator,
    specs: Sequence[BranchSpec | dict[str, Any]],
    *,
    parent_history: Sequence[ModelMessage],
    isolation: BranchIsolation | None = None,
    strategy: MergeStrategy | None = None,
    aggregate_budget_usd: float | None = None,
) -> ForkHandle:
    """``ForkCoordinator.fork``: create one workspace branch and start one task per spec;
    returns at once."""
    async with fc.state.lock:
        if not fc.state.is_resolved:
            raise InvalidStateError(f"fork {fc.fork_id} is still open: merge or abort it first")
        if fc.agent is None:
            raise InvalidStateError("this coordinator has no agent to run branches with")
        spec_list = [
            s if isinstance(s, BranchSpec) else BranchSpec.from_json(dict(s)) for s in specs
        ]
        if not spec_list:
            raise InvalidArgumentError("a fork needs at least one branch spec")
        if len(spec_list) > fc.max_branches:
            raise ForkBranchLimitError(
                f"{len(spec_list)} branches requested; max_branches is {fc.max_branches}"
            )
        if fc.depth + 1 > fc.max_depth:
            raise ForkDepthLimitError(
                f"a fork here would be {fc.depth + 1} levels deep; "
                f"max_depth is {fc.max_depth}"
            )
        labels = [s.label.strip() for s in spec_list]
        if any(not label for label in labels) or len(set(labels)) != len(labels):
            raise InvalidArgumentError(f"branch labels must be non-empty and unique: {labels}")
        for spec in spec_list:
            if spec.budget_usd is not None and spec.budget_usd < 0:
                raise InvalidArgumentError(f"budget_usd of {spec.label!r} is negative")

        fork_id = uuid.uuid4().hex[:12]
        seed = copy_history(parent_history)
        seed_json = dumps_history(seed)
        runtimes: list[BranchRuntime] = []
        # The intent comes first: a process killed from here until the full manifest is
        # written leaves durable branches that fork/sweep.py finds and aborts.
        fc.store.write_manifest(
            {
                "fork_id": fork_id,
                "creating": True,
                "pid": os.getpid(),
                "created_at": time.time(),
                "depth": fc.depth + 1,
                "resolved": False,
                "branches": [],
            }
        )
        crash_point("fork:intent")
        ws_branches = fc.branch_files.open(
            fc.parent_node,
            [ws_name(spec.label, fork_id, i) for i, spec in enumerate(spec_list)],
        )
        try:
            for index, (spec, ws_branch) in enumerate(zip(spec_list, ws_branches, strict=True)):
                runtimes.append(
                    BranchRuntime(
                        branch_id=f"{fork_id[:6]}-{index}-{uuid.uuid4().hex[:4]}",
                        label=spec.label.strip(),
                        spec=spec,
                        index=index,
                        depth=fc.depth + 1,
                        ws_branch=ws_branch,
                        workspace_branch_id=ws_branch.id,
                        path=Path(ws_branch.path),
                        seed_history=seed,
                        history=list(seed),
                    )
                )
        except BaseException:
            for ws_branch in ws_branches:
                with contextlib.suppress(Exception):
                    ws_branch.abort()
            fc.store.remove(fork_id)
            raise
        crash_point("fork:branches")

        parent_ws_id = (
            getattr(fc.parent_node, "id", None)
            if fc.parent_node is not fc.workspace
            else None
        )
        checkpoint_id = fc.checkpoints.save(
            fork_id, "fork", seed_json, parent_workspace_branch_id=parent_ws_id
        )
        handle = ForkHandle(
            fork_id=fork_id,
            branches=[rt.branch_id for rt in runtimes],
            labels={rt.branch_id: rt.label for rt in runtimes},
            depth=fc.depth + 1,
            parent_checkpoint_id=checkpoint_id,
            merge_strategy=strategy or MergeStrategy(),
            isolation=isolation or BranchIsolation(),
            aggregate_budget_usd=aggregate_budget_usd,
            parent_branch_id=fc.parent_runtime.branch_id if fc.parent_runtime else None,
            created_at=time.time(),
        )
        fc.store.write_history(fork_id, "parent", seed_json)
        # Not fsync'ed: the rename is atomic against a killed process, and fork() must stay
        # cheap (the workspace branches themselves are durable).
        fc.state.open(handle, runtimes)
        fc.recorder.persist(now=True)
        crash_point("fork:manifest")
        fc.publish(ev.ForkCreated(fork_id=fork_id, branch_ids=tuple(handle.branches)))
        for rt in runtimes:
            # An empty steer sends no new prompt: the branch runs on from the seed (a
            # seed ending in the user's request re-samples that turn: best-of-N).
            fc.runner.start(rt, rt.spec.steer.strip() or None, seed)
        return handle


__all__ = ["open_fork"]
