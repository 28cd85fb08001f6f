"""Fork branches on a real local two-node Ray cluster: ``ForkCoordinator(runner=RayRunner())``.

Each branch's model loop (a real pydantic-ai ``Agent`` on a ``FunctionModel``) runs here,
in the test's event loop; its files live in a Ray actor on one of the nodes, which runs
its ``write_file`` and ``run_command`` calls (the sandbox, on the node). One module-scoped
cluster (a head and a worker, two CPUs and its own snapshot cache each) serves every test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip(
    "ray", reason="the ray extra is not installed: pip install 'forkdeck[ray]'"
)
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from branching_core.cluster import BranchLost, RayRunner, RemoteForkBranch  # noqa: E402
from branching_core.cluster.fork_branch import ACTOR_PREFIX  # noqa: E402
from branching_core.fork import BranchSpec, current_branch  # noqa: E402
from branching_core.fork.branch_files import HOSTED_LOST  # noqa: E402
from branching_core.fork.options import ForkOptions  # noqa: E402
from branching_core.live import ForkCoordinator, LiveForkCapability  # noqa: E402
from branching_core.workspace import Workspace  # noqa: E402
from tests.cluster.helpers import STORE_BOOKKEEPING, make_tree, tree_state  # noqa: E402
from tests.cluster.ray_cluster import OBJECT_STORE, two_node_cluster  # noqa: E402
from tests.fork.helpers import Scripted, call  # noqa: E402

CACHE_BYTES = 64 << 20
STEER = "STEER: also write steered.txt"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with two_node_cluster(tmp_path_factory.mktemp("rayfork"), num_cpus=2) as c:
        yield c


# -- what must be left on the cluster: nothing ---------------------------------------------
def _branch_actors() -> list[str]:
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a["name"].startswith(ACTOR_PREFIX)]


def _wait_no_branch_actors(within: float = 20.0) -> list[str]:
    """``ray.kill`` is asynchronous: wait (bounded) until no branch actor is listed."""
    end = time.monotonic() + within
    while (left := _branch_actors()) and time.monotonic() < end:
        time.sleep(0.1)
    return left


def _leftovers(cluster: dict[str, Any]) -> dict[str, Any]:
    """Mounts under the cluster's dirs, branch dirs in any node's stores, cache sizes."""
    mounts = [line for line in Path("/proc/mounts").read_text().splitlines()
              if str(cluster["base"]) in line]
    branches = []
    sizes = []
    for cache in cluster["caches"]:
        for store in (s for s in (cache / "stores").glob("*") if s.is_dir()):
            branches += [p.name for p in store.iterdir()
                         if p.is_dir() and p.name not in STORE_BOOKKEEPING]
        sizes.append(sum(int(r.read_text() or 0) for r in cache.glob("snapshots/*/ready")))
    return {"mounts": mounts, "branches": branches, "over_bound": [s for s in sizes
                                                                   if s > CACHE_BYTES]}


# -- the model: one script per branch, keyed by the branch's label -------------------------
def _tool_results(messages: list[ModelMessage]) -> list[Any]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
            if p.part_kind == "tool-return"]


def _steered(messages: list[ModelMessage]) -> bool:
    return any(p.part_kind == "user-prompt" and isinstance(p.content, str)
               and p.content.startswith("STEER")
               for m in messages if isinstance(m, ModelRequest) for p in m.parts)


class BranchModel:
    """Each branch writes ``<label>.out`` with ``write_file``, then runs a command that
    writes ``cmd-<label>.txt`` and lists the directory; branch ``b`` waits in its first
    request until the test has steered it, and, once it reads the steer, writes
    ``steered.txt``. The final answer carries what ``ls`` showed the branch."""

    def __init__(self) -> None:
        self.steer_sent = asyncio.Event()
        self.model = FunctionModel(self.respond, model_name="branch-model")

    async def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        ctx = current_branch()
        assert ctx is not None, "the model must run inside a branch run"
        label = ctx.runtime.label
        results = _tool_results(messages)
        if not results:
            if label == "b":
                await self.steer_sent.wait()
            return ModelResponse([ToolCallPart("write_file", {
                "path": f"{label}.out", "content": f"from {label}\n"})])
        if len(results) == 1:
            return ModelResponse([ToolCallPart("run_command", {
                "command": f"echo cmd-{label} > cmd-{label}.txt && ls"})])
        if len(results) == 2 and _steered(messages):
            return ModelResponse([ToolCallPart("write_file", {
                "path": "steered.txt", "content": f"{label} read the steer\n"})])
        listing = str(results[1].content)
        return ModelResponse([TextPart(f"done {label}\n{listing}")])


async def _run_fork(ws: Workspace, runner: RayRunner | None,
                    labels: str = "abc") -> tuple[ForkCoordinator, Any]:
    script = BranchModel()
    coord = ForkCoordinator(Agent(script.model), workspace=ws, runner=runner)
    await coord.fork([BranchSpec(label, f"go {label}") for label in labels], parent_history=[])
    if "b" in labels:
        coord.steer("b", STEER)
    script.steer_sent.set()
    statuses = await coord.wait(timeout=120)
    assert [s.state for s in statuses] == ["done"] * len(labels), [
        (s.label, s.error) for s in statuses]
    return coord, script


async def test_three_branches_on_actors_stay_isolated_and_the_winner_lands_exactly(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    before = tree_state(ws.path)
    # one CPU per branch actor on two 2-CPU nodes: three branches cannot all share a node
    runner = RayRunner(cache_bytes=CACHE_BYTES, branch_resources={"CPU": 1})
    coord, _ = await _run_fork(ws, runner)
    branches = {label: coord.get_branch(label) for label in "abc"}
    remote = {label: rt.ws_branch for label, rt in branches.items()}
    assert all(isinstance(b, RemoteForkBranch) for b in remote.values())
    assert len({b.cluster_node_id for b in remote.values()}) == 2  # spread over both nodes

    # Nothing reached the parent before the merge, and each branch saw only its own files.
    assert tree_state(ws.path) == before
    for label, rt in branches.items():
        assert rt.output is not None
        listing = rt.output.split("\n", 1)[1]
        others = {o for o in "abc" if o != label}
        assert f"{label}.out" in listing and f"cmd-{label}.txt" in listing
        assert not any(f"{o}.out" in listing for o in others), (label, listing)
        created = {c.path for c in coord.file_changes(label)}
        expected = {f"{label}.out", f"cmd-{label}.txt"} | ({"steered.txt"} if label == "b"
                                                           else set())
        assert created == expected, (label, created)

    # The steer reached branch b (and only b); the diff report read every branch's files.
    assert (remote["b"].path / "steered.txt").read_text() == "b read the steer\n"
    report = coord.diff_report()
    touched = {e.path: set(e.touched_by) for e in report.paths if e.touched_by}
    assert touched["steered.txt"] == {branches["b"].branch_id}
    assert touched["a.out"] == {branches["a"].branch_id}

    # a scratch child of a branch (where the judge runs branch tests) holds its files
    scratch = remote["a"].branch("scratch")
    assert (Path(scratch.path) / "cmd-a.txt").read_text() == "cmd-a\n"
    scratch.abort()

    result = await coord.merge_or_select("pick:b")
    assert result.conflicts == [] and result.errors == []
    await coord.aclose()

    # The same fork run locally lands the same tree.
    local_ws = Workspace(make_tree(tmp_path / "local"))
    local, _ = await _run_fork(local_ws, None)
    await local.merge_or_select("pick:b")
    await local.aclose()
    assert tree_state(ws.path) == tree_state(local_ws.path)
    assert (Path(ws.path) / "steered.txt").exists() and not (Path(ws.path) / "a.out").exists()

    assert _wait_no_branch_actors() == []
    assert _leftovers(cluster) == {"mounts": [], "branches": [], "over_bound": []}
    ws.close()
    local_ws.close()


async def test_abort_leaves_no_actor_and_nothing_on_the_nodes(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    before = tree_state(ws.path)
    coord, _ = await _run_fork(ws, RayRunner(cache_bytes=CACHE_BYTES))
    assert len(_branch_actors()) == 3
    # the TUI's !cmd on a branch tab must not run in the driver's read-only copy of a branch
    # whose files live on a node (its writes would never reach the branch)
    from forkdeck.chat.shell_command import branch_target

    with pytest.raises(ValueError, match="runs on a cluster node"):
        branch_target(coord, "a")
    await coord.merge_or_select("abort")
    await coord.aclose()
    assert _wait_no_branch_actors() == []
    assert _leftovers(cluster) == {"mounts": [], "branches": [], "over_bound": []}
    assert tree_state(ws.path) == before
    ws.close()


async def test_a_parent_change_since_the_fork_is_a_conflict_left_alone(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    coord, _ = await _run_fork(ws, RayRunner(cache_bytes=CACHE_BYTES), labels="a")
    (Path(ws.path) / "a.out").write_text("the parent moved on\n")  # branch a wrote it too
    result = await coord.merge_or_select("pick:a")
    assert result.conflicts == ["a.out"]
    assert (Path(ws.path) / "a.out").read_text() == "the parent moved on\n"
    assert (Path(ws.path) / "cmd-a.txt").read_text() == "cmd-a\n"  # the rest applied
    await coord.aclose()
    assert _wait_no_branch_actors() == []
    ws.close()


async def test_the_mirror_follows_branches_on_actors(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    script = BranchModel()
    coord = ForkCoordinator(Agent(script.model), workspace=ws, materialize=True,
                            runner=RayRunner(cache_bytes=CACHE_BYTES))
    await coord.fork([BranchSpec("a", "go a"), BranchSpec("b", "go b")], parent_history=[])
    coord.steer("b", STEER)
    script.steer_sent.set()
    await coord.wait(timeout=120)
    mat = coord.mirror_hook.materializer
    assert mat is not None
    want = {("a", "a.out"): "from a\n", ("a", "cmd-a.txt"): "cmd-a\n",
            ("b", "steered.txt"): "b read the steer\n"}
    end = time.monotonic() + 20
    seen: dict[tuple[str, str], str | None] = {}
    while time.monotonic() < end:
        seen = {k: _read(mat.branch_path(*k)) for k in want}
        if seen == want:
            break
        await asyncio.sleep(0.1)
    assert seen == want
    assert _read(mat.branch_path("b", "a.out")) is None  # a sibling's file is not b's
    await coord.merge_or_select("abort")
    await coord.aclose()
    assert _wait_no_branch_actors() == []
    ws.close()


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


async def test_an_approved_command_runs_on_the_node_and_a_denied_one_never_does(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        label = current_branch().runtime.label  # type: ignore[union-attr]
        results = _tool_results(messages)
        if not results:
            return ModelResponse([ToolCallPart("run_command", {
                "command": f"echo ran > ran-{label}.txt"})])
        return ModelResponse([TextPart(f"{label}: {results[0].content}")])

    ws = Workspace(make_tree(tmp_path / "ws"))
    coord = ForkCoordinator(Agent(FunctionModel(respond)), workspace=ws,
                            approval_required=["run_command"],
                            runner=RayRunner(cache_bytes=CACHE_BYTES))
    await coord.fork([BranchSpec("yes", "y"), BranchSpec("no", "n")], parent_history=[])
    statuses = await coord.wait(timeout=120)
    assert [s.state for s in statuses] == ["awaiting_approval"] * 2
    assert coord.file_changes("yes") == [] and coord.file_changes("no") == []
    for label, ok in (("yes", True), ("no", False)):
        [call] = coord.pending_approvals(label)
        await (await coord.approve(label, {call.tool_call_id: ok}))
    assert [c.path for c in coord.file_changes("yes")] == ["ran-yes.txt"]
    assert coord.file_changes("no") == []
    assert coord.get_branch("no").state == "done"
    await coord.merge_or_select("pick:yes")
    assert (Path(ws.path) / "ran-yes.txt").read_text() == "ran\n"
    await coord.aclose()
    assert _wait_no_branch_actors() == []
    ws.close()


async def test_an_agent_forks_itself_onto_the_cluster_through_the_capability(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    @dataclass
    class Deps:
        fork_coordinator: Any = None

    s = Scripted({
        "P": [call("fork_run", specs=[{"label": "x", "steer": "X"}]),
              call("wait_branches", timeout=60), call("merge_or_select", action="pick:x")],
        "X": [call("write_file", path="x.out", content="x"),
              call("run_command", command="echo hi > x.cmd")],
    })
    ws = Workspace(make_tree(tmp_path / "ws"))
    cap = LiveForkCapability(workspace=ws, options=ForkOptions(
        runner=RayRunner(cache_bytes=CACHE_BYTES)))
    deps = Deps()
    result = await Agent(s.model, capabilities=[cap]).run("P", deps=deps)
    assert result.output == "P: finished"
    # the branch's tools ran on its actor: what its view here never held landed on merge
    assert (Path(ws.path) / "x.out").read_text() == "x"
    assert (Path(ws.path) / "x.cmd").read_text() == "hi\n"
    assert deps.fork_coordinator.is_resolved
    assert _wait_no_branch_actors() == []
    ws.close()


async def test_a_budget_stops_a_branch_before_its_tool_call_reaches_the_node(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    script = BranchModel()
    script.steer_sent.set()
    coord = ForkCoordinator(Agent(script.model), workspace=ws, price_fn=lambda _r: 0.01,
                            runner=RayRunner(cache_bytes=CACHE_BYTES))
    await coord.fork([BranchSpec("a", "go a", budget_usd=0.005),
                      BranchSpec("c", "go c", budget_usd=1.0)], parent_history=[])
    a, c = await coord.wait(timeout=120)
    assert (a.state, c.state) == ("budget_exhausted", "done")
    assert coord.file_changes("a") == []  # its first (priced) response's call never ran
    assert {x.path for x in coord.file_changes("c")} == {"c.out", "cmd-c.txt"}
    await coord.aclose()
    assert _wait_no_branch_actors() == []
    ws.close()


def _sleepers(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == (
                    f"sleep\0{marker}\0".encode()):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


async def test_terminating_a_branch_kills_its_command_on_the_node(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    marker = "61.25"  # a sleep nobody else runs

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not _tool_results(messages):
            return ModelResponse([ToolCallPart("run_command", {"command": f"sleep {marker}"})])
        return ModelResponse([TextPart("done")])

    ws = Workspace(make_tree(tmp_path / "ws"))
    coord = ForkCoordinator(Agent(FunctionModel(respond)), workspace=ws,
                            runner=RayRunner(cache_bytes=CACHE_BYTES))
    await coord.fork([BranchSpec("s", "sleep")], parent_history=[])
    end = time.monotonic() + 60
    while not _sleepers(marker) and time.monotonic() < end:
        await asyncio.sleep(0.1)
    assert _sleepers(marker), "the command never started on its node"
    status = await coord.terminate_branch("s")
    assert status.state == "terminated"
    end = time.monotonic() + 10
    while _sleepers(marker) and time.monotonic() < end:
        await asyncio.sleep(0.1)
    assert _sleepers(marker) == [], "the branch's command outlived its termination"
    assert len(_branch_actors()) == 1  # killed the command, not the branch
    await coord.aclose()
    assert _wait_no_branch_actors() == []
    ws.close()


async def test_a_node_dying_fails_the_branch_on_it_and_nothing_lands(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    c = cluster["cluster"]
    doomed = c.add_node(num_cpus=1, resources={"doomed": 1}, object_store_memory=OBJECT_STORE,
                        env_vars={"FORKDECK_RAY_CACHE": str(cluster["base"] / "cache-doomed")})
    c.wait_for_nodes()
    ws = Workspace(make_tree(tmp_path / "ws"))
    before = tree_state(ws.path)
    script = BranchModel()  # branch b waits in its first request until steer_sent
    # b's actor needs the doomed node's resource
    on_doomed = RayRunner(cache_bytes=CACHE_BYTES, branch_resources={"CPU": 0, "doomed": 1})
    coord = ForkCoordinator(Agent(script.model), workspace=ws, runner=on_doomed)
    await coord.fork([BranchSpec("b", "go b")], parent_history=[])
    [b] = coord.branches.values()
    assert b.ws_branch.cluster_node_id == doomed.node_id
    pid = b.ws_branch.worker_pid  # (every node of this test cluster is this machine)
    c.remove_node(doomed, allow_graceful=False)
    end = time.monotonic() + 30  # the actor's worker outlives its raylet for a moment
    while Path(f"/proc/{pid}").exists() and time.monotonic() < end:
        await asyncio.sleep(0.05)
    script.steer_sent.set()  # b's first tool call now meets its dead node
    [status] = await coord.wait(timeout=60)
    assert status.state == "failed"
    assert status.error is not None and status.error.startswith("BranchLost: its files are lost")
    with pytest.raises(BranchLost):  # nothing to merge: refused, the workspace untouched
        await coord.merge_or_select("pick:b")
    assert tree_state(ws.path) == before
    await coord.aclose()
    assert _wait_no_branch_actors() == []
    ws.close()


async def test_a_dead_actor_fails_its_branch_and_recovery_reports_it_lost(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    script = BranchModel()
    coord = ForkCoordinator(Agent(script.model), workspace=ws,
                            runner=RayRunner(cache_bytes=CACHE_BYTES))
    await coord.fork([BranchSpec("b", "go b")], parent_history=[])
    branch = coord.get_branch("b").ws_branch
    assert isinstance(branch, RemoteForkBranch) and branch.cluster_node_id
    ray.kill(ray.get_actor(f"{ACTOR_PREFIX}{branch.name}", namespace=None), no_restart=True)
    script.steer_sent.set()  # its first tool call now meets a dead actor
    [status] = await coord.wait(timeout=60)
    assert status.state == "failed"
    assert status.error is not None and "Ray actor" in status.error
    assert _leftovers(cluster)["mounts"] == []  # the killed actor's overlay went with it

    # What a restarted driver finds: the branch is lost, never a half-merged state.
    recovered = ForkCoordinator.recover(Workspace(ws.path), Agent(script.model))
    [again] = [c for c in recovered if c.fork_id == coord.fork_id]
    [rt] = again.branches.values()
    assert rt.state == "failed" and rt.error == HOSTED_LOST and rt.ws_branch is None
    await again.aclose()
    await coord.aclose()
    assert _wait_no_branch_actors() == []
    ws.close()
