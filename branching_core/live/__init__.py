"""The agent-facing layer: what a model and its callers use to fork (DESIGN.md "Layers").

Above ``branching_core.fork`` (running forks, which uses ``branching_core.review`` to judge
them): ``ForkCoordinator`` (re-exported from the fork layer: there is one),
``LiveForkCapability`` (forking for any pydantic-ai ``Agent``) and the forking
toolset the model calls (``fork_run``, ``diff_branches``, ``merge_or_select`` ...), and
sub-agent runs (``branching_core.live.subagents``: the ``branch`` tool and its registry).
"""

from __future__ import annotations

from branching_core.fork.coordinator import ForkCoordinator
from branching_core.live.capability import LiveForkCapability
from branching_core.live.tools import create_fork_toolset

__all__ = ["ForkCoordinator", "LiveForkCapability", "create_fork_toolset"]
