"""The local two-node Ray cluster the cluster tests run on (one per test module).

A head and a worker node (``ray.cluster_utils.Cluster``), each with its own snapshot
cache through ``FORKDECK_RAY_CACHE``, and ``ray.init`` connected to it. Per module, not
per session: the modules size their nodes differently (the runner tests count on one
CPU a node, the fork tests want two) and their node-death tests add and remove nodes.
Ray is imported only when a cluster is made (``helpers.py`` and ``test_no_ray.py`` run
without it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

OBJECT_STORE = 100 << 20


@contextmanager
def two_node_cluster(base: Path, *, num_cpus: int) -> Iterator[dict[str, Any]]:
    """Start the cluster under ``base`` and connect; yields ``{"cluster", "base",
    "caches"}``; shuts both down afterwards."""
    import ray
    from ray.cluster_utils import Cluster

    caches = [base / "cache-head", base / "cache-worker"]
    c = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": num_cpus,
            "object_store_memory": OBJECT_STORE,
            "env_vars": {"FORKDECK_RAY_CACHE": str(caches[0])},
        },
    )
    c.add_node(
        num_cpus=num_cpus,
        object_store_memory=OBJECT_STORE,
        env_vars={"FORKDECK_RAY_CACHE": str(caches[1])},
    )
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    _wait_until_both_nodes_schedule()
    try:
        yield {"cluster": c, "base": base, "caches": caches}
    finally:
        ray.shutdown()
        c.shutdown()


def _wait_until_both_nodes_schedule(timeout: float = 60.0) -> None:
    """Registered is not yet schedulable: until the worker's raylet has reported its CPU,
    SPREAD places every task on the head. Wait (bounded) until a task has run on each."""
    import ray

    @ray.remote(num_cpus=1)
    def where() -> str:
        return ray.get_runtime_context().get_node_id()

    deadline = time.monotonic() + timeout
    seen: set[str] = set()
    while len(seen) < 2 and time.monotonic() < deadline:
        seen |= set(
            ray.get([where.options(scheduling_strategy="SPREAD").remote() for _ in range(4)])
        )
        if len(seen) < 2:
            time.sleep(0.2)
    assert len(seen) == 2, f"the two-node cluster never scheduled on both nodes: {seen}"


__all__ = ["OBJECT_STORE", "two_node_cluster"]
