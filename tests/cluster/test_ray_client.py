"""RayRunner through a ``ray://`` address (Ray Client), on a real local cluster.

The head node of a ``ray.cluster_utils.Cluster`` is started with a Ray Client server
port (``ray_client_server_port``, as ``ray start --head --ray-client-server-port``
does); the driver does not join the cluster itself, it connects through
``RayRunner(address="ray://127.0.0.1:PORT")``. A small BestOfN then runs its
candidates on the cluster and commits the best one's delta to the local workspace.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip(
    "ray", reason="the ray extra is not installed: pip install 'forkdeck[ray]'"
)
from ray.cluster_utils import Cluster  # noqa: E402

from branching_core.cluster import RayRunner  # noqa: E402
from branching_core.patterns import BestOfN  # noqa: E402
from branching_core.workspace import Workspace  # noqa: E402

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="module")
def client_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if ray.is_initialized():  # another module's cluster: this test connects on its own
        ray.shutdown()
    base = tmp_path_factory.mktemp("rayclient")
    port = _free_port()
    # The Ray Client proxier forks a server per connection while its gRPC threads run;
    # with gRPC's fork handlers on, that server can die at birth ("Starting Ray client
    # server failed", ray-project/ray#63202). The head's processes inherit this.
    saved = os.environ.get("GRPC_ENABLE_FORK_SUPPORT")
    os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"
    cluster: Cluster | None = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 2, "object_store_memory": 100 << 20, "ray_client_server_port": port,
            "include_dashboard": False,
            "env_vars": {"FORKDECK_RAY_CACHE": str(base / "cache")},
        })
        _wait_for_port(port)  # the client server starts after the head; slowly under load
        yield f"ray://127.0.0.1:{port}"
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        if saved is None:
            os.environ.pop("GRPC_ENABLE_FORK_SUPPORT", None)
        else:
            os.environ["GRPC_ENABLE_FORK_SUPPORT"] = saved


def attempt_file(path: Path, attempt: int) -> tuple[bool, float]:
    """Candidate: writes which attempt it was; later attempts score higher."""
    (Path(path) / "answer.txt").write_text(f"attempt {attempt}\n")
    (Path(path) / f"only-{attempt}.txt").write_text("x")
    return True, float(attempt)


def test_best_of_n_through_ray_client(client_address: str, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "answer.txt").write_text("none yet\n")
    (root / "keep.txt").write_text("untouched\n")
    ws = Workspace(root)
    runner = RayRunner(address=client_address, locate_lost=False)
    try:
        outcome: Any = BestOfN(attempt_file, n=3, runner=runner)(ws)
        assert ray.util.client.ray.is_connected(), "not connected through Ray Client"
    finally:
        ws.close()
    assert outcome.committed and outcome.winner is not None
    assert [r.status for r in outcome.all_results] == ["aborted", "aborted", "committed"]
    assert all(r.success and r.node_id for r in outcome.all_results)
    assert outcome.winner.branch_index == 2
    assert (root / "answer.txt").read_text() == "attempt 2\n"
    assert (root / "keep.txt").read_text() == "untouched\n"
    # Only the winner's delta landed: the losers' files are nowhere in the workspace.
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == [
        "answer.txt", "keep.txt", "only-2.txt"]
    assert runner.stats["tasks"] == 3
