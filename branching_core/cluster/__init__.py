"""Run pattern candidates on a Ray cluster: ``RayRunner`` (an optional extra).

``pip install 'forkdeck[ray]'``. Nothing outside this package imports Ray, and this
package imports it only when a ``RayRunner`` is made, so ``import branching_core``
never needs it. ``snapshot`` (what is shipped), ``node_cache`` (where it is kept on
a node), ``task`` (what runs there), ``delta`` (what comes back and how it lands)
and ``runner`` (the driver side) are the parts; ``fork_actor`` (a fork branch's files
on a node) and ``fork_branch`` (its driver side) host ``ForkCoordinator`` branches.
"""

from __future__ import annotations

from branching_core.cluster._ray import EXTRA_HINT, RayUnavailableError
from branching_core.cluster.delta import Delta
from branching_core.cluster.fork_branch import BranchLost, RemoteForkBranch
from branching_core.cluster.runner import CandidateLost, RayRunner, disconnect_started_ray

__all__ = [
    "EXTRA_HINT",
    "BranchLost",
    "CandidateLost",
    "Delta",
    "RayRunner",
    "RayUnavailableError",
    "RemoteForkBranch",
    "disconnect_started_ray",
]
