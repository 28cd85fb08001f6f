"""``ForkOptions``: every setting a fork coordinator hands down to the forks nested in it.

One frozen value instead of a list of constructor parameters re-typed at each place a
coordinator is made (``nested()``, the capability's ``for_run``, ``recover()``): a nested
fork is ``replace(options, default_model=...)`` of its parent's, so no setting (tool
approvals were once dropped that way) can be forgotten when a new one is added.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from branching_core.errors import InvalidTypeError
from branching_core.fork.budget import PriceFn

ApprovalPolicy = Callable[[str, dict[str, Any]], bool] | Sequence[str] | bool
"""Which workspace tool calls need a person's approval: a predicate over (tool name, args),
a collection of tool names, or True for all of them."""

ModelResolver = Callable[[str], Any]
DepsFactory = Callable[[Any, Any], Any]
"""``deps_factory(parent_deps, branch_runtime)``: the deps object one branch run gets."""

UnknownPricePolicy = Literal["stop", "continue"]
"""What a branch with a budget does when its response cannot be priced: ``stop`` (state
``budget_unknown``; the default) or ``continue`` (the cost is shown as unknown)."""


@dataclass(frozen=True)
class ForkOptions:
    """How a coordinator runs, prices and guards its branches (inherited by nested forks).

    ``model_resolver`` turns ``BranchSpec.model`` into a model (default:
    ``branching_core.agent.resolve_model``); ``price_fn`` prices one response in USD
    (default: genai-prices); ``default_model`` is what a branch without a model of its own
    runs (the parent run's model); ``provide_workspace_tools`` gives each branch run a
    workspace toolset bound to its branch (the capability contributes its own instead);
    ``approval_required`` names the workspace tool calls a person must approve;
    ``on_unknown_price`` decides what a branch with a budget does when a response cannot be
    priced; ``materialize``/``keep_artifacts`` control the on-disk mirror for diff tools;
    ``keep_resolved`` is how many resolved forks keep their manifest and histories on disk
    (``"all"``: every one; ``"settings"``: ``[fork] keep_resolved`` of the workspace's
    config.toml, default 20; see ``fork/retention.py`` for when file copies are dropped);
    ``runner`` is where branch files live: ``None`` (this machine) or a runner that hosts
    them, e.g. ``branching_core.cluster.RayRunner()``: one Ray actor per branch on a worker
    node, the model loops staying here (``fork/branch_files.py``).
    """

    max_branches: int = 10
    max_depth: int = 2
    model_resolver: ModelResolver | None = None
    price_fn: PriceFn | None = None
    default_model: Any = None
    command_runner: Any = None
    provide_workspace_tools: bool = True
    deps_factory: DepsFactory | None = None
    stream_text: bool = False
    usage_limits: Any = None
    approval_required: ApprovalPolicy | None = None
    on_unknown_price: UnknownPricePolicy = "stop"
    materialize: bool = False
    keep_artifacts: bool = False
    keep_resolved: int | Literal["all", "settings"] = "settings"
    runner: Any = None
    external_runner: Any = None  # runs ``agent:NAME`` branches (fork/external_branch.py)
    network: Any = None
    """A ``NetworkSetup``: each local branch gets its own network and services
    (``fork/branch_network.py``); None: commands get the sandbox's default."""

    @classmethod
    def build(cls, base: ForkOptions | None = None, **overrides: Any) -> ForkOptions:
        """``base`` (or the defaults) with ``overrides``; an unknown name is a ``TypeError``."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            known = ", ".join(sorted(names))
            raise InvalidTypeError(f"unknown fork option {unknown[0]!r}; known: {known}")
        return cls(**overrides) if base is None else replace(base, **overrides)


OPTION_NAMES: frozenset[str] = frozenset(f.name for f in fields(ForkOptions))

__all__ = [
    "OPTION_NAMES",
    "ApprovalPolicy",
    "DepsFactory",
    "ForkOptions",
    "ModelResolver",
    "UnknownPricePolicy",
]
