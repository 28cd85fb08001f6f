"""``LiveForkCapability``: Live Run Forking for any pydantic-ai ``Agent``.

::

    agent = Agent(model, capabilities=[LiveForkCapability(workspace="path/to/project")])

Every run gets its own :class:`ForkCoordinator` (``for_run``), so concurrent parent runs of
one agent never share a fork. A coordinator whose fork was not resolved when its run ended
is preserved: it is stored on ``deps.fork_coordinator`` when the deps object has that
attribute (the next turn with the same deps adopts it), and it stays listed in
:meth:`LiveForkCapability.open_coordinators` (and on disk, see ``recover``).

The capability contributes the workspace toolset (bound to the workspace root in a parent
run and to the branch's copy-on-write view in a branch run) and the forking toolset. A
branch run is recognised by the context the coordinator sets in the branch task; its
forking tools drive a nested coordinator whose branches are taken from the branch itself.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.toolsets import CombinedToolset

from branching_core.errors import InvalidArgumentError
from branching_core.fork.coordinator import ForkCoordinator
from branching_core.fork.options import ForkOptions
from branching_core.fork.runtime import BranchRunContext, current_branch
from branching_core.live.tools import create_fork_toolset
from branching_core.workspace import Workspace


@dataclass
class LiveForkCapability(AbstractCapability[Any]):
    """Wires Live Run Forking into an agent (see the module docstring).

    ``workspace`` is the project directory (a path or a ``Workspace``). ``model_resolver``
    maps ``BranchSpec.model`` names to models (default ``branching_core.agent.resolve_model``),
    ``price_fn`` prices responses (default genai-prices), ``command_runner`` runs the
    ``run_command`` tool (default: the sandbox). ``deps_factory(parent_deps, runtime)`` may
    clone deps per branch (default: the parent's deps object is shared).
    ``approval_required`` names the workspace tool calls of branch runs a person must approve
    (see :class:`ForkOptions`); ``options`` is a whole :class:`ForkOptions` the fields above
    are laid over (what every coordinator of this capability is built from).
    """

    workspace: Any = None
    max_branches: int = 10
    max_depth: int = 2
    include_workspace_tools: bool = True
    command_runner: Any = None
    command_timeout: float = 60.0
    model_resolver: Any = None
    price_fn: Any = None
    deps_factory: Any = None
    stream_text: bool = False
    keep_artifacts: bool = False
    materialize: bool = False
    """Mirror every fork under ``.pydantic-deep/forks/<id>/{parent,branches}`` for diff tools
    (``branching_core.fork.mirror``); removed on merge/abort unless ``keep_artifacts``."""
    approval_required: Any = None
    options: ForkOptions | None = None

    coordinator: ForkCoordinator | None = field(default=None, repr=False, compare=False)
    """The run's coordinator (set on the per-run copy returned by ``for_run``)."""
    _branch: BranchRunContext | None = field(default=None, repr=False, compare=False)
    _template: LiveForkCapability | None = field(default=None, repr=False, compare=False)
    _latest_messages: list[Any] = field(default_factory=list, repr=False, compare=False)
    _ws: Workspace | None = field(default=None, repr=False, compare=False)
    _all: Any = field(default=None, repr=False, compare=False)
    _claimed: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._all = weakref.WeakSet()
        self._claimed = weakref.WeakSet()

    # -- workspace -------------------------------------------------------------------------
    def get_workspace_obj(self) -> Workspace:
        root = self._template or self
        if root._ws is None:
            if root.workspace is None:
                raise InvalidArgumentError(
                    "LiveForkCapability needs workspace= (a directory or a Workspace)"
                )
            root._ws = (
                root.workspace
                if isinstance(root.workspace, Workspace)
                else Workspace(root.workspace)
            )
        return root._ws

    @property
    def root(self) -> Path | None:
        if self._branch is not None:
            return self._branch.runtime.path
        if self._ws is not None:
            return self._ws.path
        if self._template is not None and self._template._ws is not None:
            return self._template._ws.path
        if isinstance(self.workspace, Workspace):
            return self.workspace.path
        return Path(self.workspace) if self.workspace is not None else None

    # -- per run -----------------------------------------------------------------------------
    async def for_run(self, ctx: Any) -> LiveForkCapability:
        template = self._template or self
        clone = replace(
            template,
            coordinator=None,
            _branch=None,
            _template=None,
            _latest_messages=[],
            _ws=None,
        )
        clone._template = template
        bctx = current_branch()
        if bctx is not None and (
            bctx.coordinator.agent is None or bctx.coordinator.agent is ctx.agent
        ):
            clone._branch = bctx
            clone.coordinator = bctx.coordinator.nested(bctx.runtime)
            return clone
        ws = template.get_workspace_obj()
        coord = template._adopt(ctx.deps)
        if coord is None:
            coord = ForkCoordinator(
                ctx.agent,
                ctx.deps,
                workspace=ws,
                options=replace(template.fork_options(), default_model=ctx.model),
            )
            template._all.add(coord)
        template._claimed.add(coord)
        clone.coordinator = coord
        if ctx.deps is not None and hasattr(ctx.deps, "fork_coordinator"):
            try:
                ctx.deps.fork_coordinator = coord
            except (AttributeError, TypeError):
                pass
        return clone

    def fork_options(self) -> ForkOptions:
        """The options every coordinator of this capability is built from (one place).

        The capability contributes the workspace toolset itself, so its coordinators never
        add a second one to branch runs.
        """
        return ForkOptions.build(
            self.options,
            max_branches=self.max_branches,
            max_depth=self.max_depth,
            command_runner=self.command_runner,
            model_resolver=self.model_resolver,
            price_fn=self.price_fn,
            deps_factory=self.deps_factory,
            stream_text=self.stream_text,
            keep_artifacts=self.keep_artifacts,
            materialize=self.materialize,
            approval_required=self.approval_required,
            provide_workspace_tools=False,
        )

    def _adopt(self, deps: Any) -> ForkCoordinator | None:
        previous = getattr(deps, "fork_coordinator", None) if deps is not None else None
        if (
            isinstance(previous, ForkCoordinator)
            and not previous.is_resolved
            and previous not in self._claimed
        ):
            return previous
        return None

    async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
        try:
            return await handler()
        finally:
            if self._template is not None and self.coordinator is not None and self._branch is None:
                self._template._claimed.discard(self.coordinator)

    def open_coordinators(self) -> list[ForkCoordinator]:
        """Coordinators of this agent's runs whose fork is still open."""
        root = self._template or self
        return [c for c in list(root._all) if c.fork_id is not None and not c.is_resolved]

    def adopt(self, coordinator: ForkCoordinator) -> None:
        """Register a coordinator (e.g. one from ``ForkCoordinator.recover``) here."""
        (self._template or self)._all.add(coordinator)

    def recover(self, agent: Any = None) -> list[ForkCoordinator]:
        """Rebuild the forks left open in the workspace (after a crash or a restart)."""
        root = self._template or self
        coords = ForkCoordinator.recover(
            root.get_workspace_obj(), agent, options=root.fork_options()
        )
        for coord in coords:
            root._all.add(coord)
        return coords

    # -- contributions ---------------------------------------------------------------------------
    def get_toolset(self) -> Any:
        toolsets: list[Any] = []
        root = self.root
        if self.include_workspace_tools and root is not None and Path(root).is_dir():
            from branching_core.agent import create_workspace_toolset

            bctx = self._branch
            if bctx is not None and bctx.runtime.ws_branch is not None:
                # a branch run: its tools act wherever its coordinator keeps its files
                toolset: Any = bctx.coordinator.branch_files.toolset(
                    bctx.runtime.ws_branch, command_timeout=self.command_timeout
                )
            else:
                toolset = create_workspace_toolset(
                    root, command_runner=self.command_runner, command_timeout=self.command_timeout
                )
            needs = self._branch.coordinator.approval_required if self._branch else None
            if needs is not None:  # a branch run: its coordinator's approvals apply
                toolset = toolset.approval_required(
                    lambda _ctx, tool_def, args: needs(tool_def.name, args)
                )
            toolsets.append(toolset)
        toolsets.append(create_fork_toolset(lambda: self.coordinator))
        return CombinedToolset(toolsets)

    @property
    def latest_messages(self) -> list[Any]:
        """Snapshot of this run's most recent message list (a copy)."""
        return list(self._latest_messages)

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        self._latest_messages = list(ctx.messages)
        if self._branch is not None:
            self._branch.coordinator.capture_partial_history(
                self._branch.runtime.branch_id, ctx.messages
            )
        return request_context

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        """Anchor for post-turn work; an unresolved coordinator simply stays preserved."""
        return result


__all__ = ["LiveForkCapability"]
