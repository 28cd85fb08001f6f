"""The agent-facing layer: what a model and its callers use to fork (DESIGN.md "Layers").

Above ``branching_core.fork`` (running forks, which uses ``branching_core.review`` to judge
them): ``ForkCoordinator`` (re-exported from the fork layer: there is one),
``LiveForkCapability`` (forking for any pydantic-ai ``Agent``) and the forking
toolset the model calls (``fork_run``, ``diff_branches``, ``merge_or_select`` ...), and
sub-agent runs (``branching_core.live.subagents``: the ``branch`` tool and its registry).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from branching_core._lazy import lazy_exports
from branching_core.fork.coordinator import ForkCoordinator
from branching_core.live.capability import LiveForkCapability
from branching_core.live.tools import create_fork_toolset

if TYPE_CHECKING:  # loaded on first use (``__getattr__``)
    from branching_core.live.subagents import SubAgent as SubAgent
    from branching_core.live.subagents import SubAgentBranches as SubAgentBranches

_LAZY: dict[str, str] = {
    # sub-agent definitions and their registry (``forkdeck --subagents MODULE:NAME``)
    "SubAgent": "branching_core.live.subagents",
    "SubAgentBranches": "branching_core.live.subagents",
}

__all__ = [
    "ForkCoordinator",
    "LiveForkCapability",
    "SubAgent",
    "SubAgentBranches",
    "create_fork_toolset",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
