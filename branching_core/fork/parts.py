"""``CoordinatorParts``: what the parts of ``ForkCoordinator`` share, declared once.

The coordinator is one object assembled from a facade (``coordinator.py``) and parts with
one job each (``run_loop``, ``approvals``, ``inspection``, ``merge``, ``persistence``).
Each part calls into the state and methods of the others; this base class declares them so
a type checker (and a reader) sees what a part may rely on. It holds no code: everything
is set in ``ForkCoordinator.__init__`` or defined in one part.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_ai import DeferredToolRequests, DeferredToolResults
    from pydantic_ai.messages import ModelMessage

    from branching_core.config.schema import Settings
    from branching_core.fork import events as ev
    from branching_core.fork.branch_files import BranchFiles
    from branching_core.fork.budget import PriceFn
    from branching_core.fork.checkpoints import CheckpointStore
    from branching_core.fork.coordinator import ForkCoordinator
    from branching_core.fork.options import DepsFactory, ForkOptions, ModelResolver
    from branching_core.fork.runtime import BranchRuntime
    from branching_core.fork.state_writer import StateWriter
    from branching_core.fork.store import ForkStore
    from branching_core.fork.types import BranchState, BranchStatus, ForkHandle, MergeStrategy
    from branching_core.review.resolver import ModelChoice
    from branching_core.review.types import BranchDiffReport, ResolveOutcome
    from branching_core.sandbox import ResourceLimits
    from branching_core.workspace import Workspace


class CoordinatorParts:
    """Shared state and cross-part methods of ``ForkCoordinator`` (declarations only)."""

    # -- set in ForkCoordinator.__init__ ------------------------------------------------------
    agent: Any
    parent_deps: Any
    options: ForkOptions
    workspace: Workspace
    parent_node: Any
    depth: int
    store: ForkStore
    checkpoints: CheckpointStore
    parent_runtime: BranchRuntime | None
    parent_coordinator: ForkCoordinator | None
    approval_required: Callable[[str, dict[str, Any]], bool] | None
    recovery_errors: list[str]
    save_errors: list[str]
    mirror_hook: Any
    branch_files: BranchFiles
    _handle: ForkHandle | None
    _branches: dict[str, BranchRuntime]
    _resolved: bool
    _resolution: str | None
    _post_checkpoint: str | None
    _resolved_at: float | None
    _lock: asyncio.Lock
    _writer: StateWriter
    _background: set[asyncio.Task[Any]]

    if TYPE_CHECKING:
        # -- defined by the facade (coordinator.py) -------------------------------------------
        def __init__(
            self,
            agent: Any = None,
            parent_deps: Any = None,
            *,
            workspace: Workspace | str | Path,
            parent_node: Any = None,
            depth: int = 0,
            store: ForkStore | None = None,
            checkpoint_store: CheckpointStore | None = None,
            parent_runtime: BranchRuntime | None = None,
            parent_coordinator: ForkCoordinator | None = None,
            options: ForkOptions | None = None,
            **option_overrides: Any,
        ) -> None: ...
        @property
        def fork_id(self) -> str | None: ...
        @property
        def model_resolver(self) -> ModelResolver | None: ...
        @property
        def price_fn(self) -> PriceFn: ...
        @property
        def default_model(self) -> Any: ...
        @property
        def command_runner(self) -> Any: ...
        @property
        def provide_workspace_tools(self) -> bool: ...
        @property
        def deps_factory(self) -> DepsFactory | None: ...
        @property
        def stream_text(self) -> bool: ...
        @property
        def usage_limits(self) -> Any: ...
        @property
        def max_branches(self) -> int: ...
        @property
        def max_depth(self) -> int: ...
        @property
        def parent_path(self) -> Path: ...
        def _publish(self, event: ev.ForkEvent) -> None: ...
        def _require_handle(self) -> ForkHandle: ...
        def get_branch(self, key: str) -> BranchRuntime: ...
        async def terminate_branch(
            self, branch_id: str, *, reason: BranchState | None = None
        ) -> BranchStatus: ...
        def diff_report(self, paths: list[str] | None = None) -> BranchDiffReport: ...
        async def resolve(
            self,
            strategy: MergeStrategy | None = None,
            *,
            goal: str | None = None,
            judges: Sequence[ModelChoice] | None = None,
            test_command: str | None = None,
            test_timeout_s: float | None = None,
            test_limits: ResourceLimits | None = None,
            settings: Settings | None = None,
            commit: bool = False,
            wait_timeout: float | None = None,
            env: Mapping[str, str] | None = None,
        ) -> ResolveOutcome: ...

        # -- run_loop.py ----------------------------------------------------------------------
        def _start(
            self,
            rt: BranchRuntime,
            prompt: str | None,
            history: list[ModelMessage],
            deferred: DeferredToolResults | None = None,
        ) -> asyncio.Task[None]: ...
        def _set_state(
            self, rt: BranchRuntime, state: BranchState, *, persist: bool = True
        ) -> None: ...

        # -- approvals.py ---------------------------------------------------------------------
        def _await_approval(self, rt: BranchRuntime, requests: DeferredToolRequests) -> None: ...

        # -- inspection.py --------------------------------------------------------------------
        def inspect_branches(self) -> list[BranchStatus]: ...
        async def wait(
            self, timeout: float | None = None, branch_ids: Sequence[str] | None = None
        ) -> list[BranchStatus]: ...

        # -- merge.py -------------------------------------------------------------------------
        def _parent_ws_id(self) -> str | None: ...
        async def abort_fork(self) -> list[str]: ...

        # -- persistence.py -------------------------------------------------------------------
        def _persist(self, *, durable: bool = False, now: bool = False) -> None: ...
        async def _persist_durable(self) -> None: ...
        def _prune_later(self) -> None: ...
        def _save_history(self, rt: BranchRuntime) -> None: ...
        def _persist_or_report(self, rt: BranchRuntime | None = None) -> None: ...
        def _save_failed(
            self, fork_id: str, name: str, exc: BaseException, rt: BranchRuntime | None = None
        ) -> None: ...
        def _restore(self, manifest: dict[str, Any]) -> None: ...


__all__ = ["CoordinatorParts"]
