"""RayRunner on a real local multi-node Ray cluster (``ray.cluster_utils.Cluster``).

One module-scoped cluster (a head and one worker node, one CPU and a 100 MB object
store each, every node with its own snapshot cache through ``FORKDECK_RAY_CACHE``)
serves every test; the node-death test adds and removes its own third node.
Candidates are module-level functions shipped by value (cloudpickle), and report
their pid and node cache directory in files, so the tests can check that nothing
they started is still running.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip(
    "ray", reason="the ray extra is not installed: pip install 'forkdeck[ray]'"
)

from branching_core.cluster import CandidateLost, RayRunner  # noqa: E402
from branching_core.cluster.snapshot import scan  # noqa: E402
from branching_core.errors import ConflictError  # noqa: E402
from branching_core.patterns import BestOfN, Cascaded, Reflexion, Speculate  # noqa: E402
from branching_core.workspace import Workspace  # noqa: E402
from tests.cluster.helpers import (  # noqa: E402
    STORE_BOOKKEEPING,
    edit_everything,
    make_tree,
    tree_state,
)
from tests.cluster.ray_cluster import OBJECT_STORE, two_node_cluster  # noqa: E402
from tests.support.procs import alive  # noqa: E402

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ray.cloudpickle.register_pickle_by_value(sys.modules["tests.cluster.helpers"])

NOTES = "FORKDECK_TEST_NOTES"  # where candidates leave pid files (same machine)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with two_node_cluster(tmp_path_factory.mktemp("raycluster"), num_cpus=1) as c:
        yield c


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    d = tmp_path / "notes"
    d.mkdir()
    return d


def _note(notes: str, tag: str) -> None:
    node = Path(os.environ.get("FORKDECK_RAY_CACHE", "?")).name
    Path(notes, f"{tag}.{os.getpid()}.{node}").write_text("")


def _pids(notes: Path) -> list[int]:
    return [int(p.name.split(".")[1]) for p in notes.iterdir()]


def _wait_dead(pids: list[int], within: float = 10.0) -> list[int]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not any(alive(p) for p in pids):
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def _our_mounts(base: Path) -> list[str]:
    return [line for line in Path("/proc/mounts").read_text().splitlines() if str(base) in line]


def _open_branch_dirs(caches: list[Path]) -> list[str]:
    """Branch directories left in any node's stores (bookkeeping dirs aside)."""
    left = []
    for cache in caches:
        # stores/ also holds the store sweeper's stamp file: only directories are stores
        for store in (s for s in (cache / "stores").glob("*") if s.is_dir()):
            left += [p.name for p in store.iterdir()
                     if p.is_dir() and p.name not in STORE_BOOKKEEPING]
    return left


def _await_no_branch_dirs(caches: list[Path], within: float = 30.0) -> list[str]:
    """``_open_branch_dirs`` once it is empty, or after ``within`` seconds: a cancelled
    task aborts its branch on its node after the driver has its outcome."""
    deadline = time.monotonic() + within
    while _open_branch_dirs(caches) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _open_branch_dirs(caches)


# -- candidates (run on the nodes) ------------------------------------------------------------
def scored_writer(path: Path, i: int, notes: str) -> tuple[bool, float]:
    _note(notes, f"cand{i}")
    p = Path(path)
    (p / f"r{i}.txt").write_text(f"rollout {i}\n")
    (p / "a.txt").write_text(f"alpha by {i}\n")
    return i % 3 != 0, [0.1, 0.5, 0.9, 0.3, 0.7, 0.95, 0.2, 0.4][i]


def sleeper(path: Path, notes: str, seconds: float) -> bool:
    _note(notes, "sleeper")
    time.sleep(seconds)
    (Path(path) / "slow.txt").write_text("slow\n")
    return True


def quick_after(path: Path, notes: str, wait_for: int) -> bool:
    """Wins once ``wait_for`` sleepers are running, so the race really has a loser."""
    end = time.monotonic() + 30
    while sum(1 for n in os.listdir(notes) if n.startswith("sleeper")) < wait_for:
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    (Path(path) / "fast.txt").write_text("fast\n")
    return True


def all_edits(path: Path) -> bool:
    edit_everything(path)
    return True


def bind(fn: Any, *args: Any) -> Any:
    def candidate(path: Path) -> Any:
        return fn(path, *args)

    return candidate


def indexed(fn: Any, *args: Any) -> Any:
    def task(path: Path, i: int) -> Any:
        return fn(path, i, *args)

    return task


# -- tests ------------------------------------------------------------------------------------
def test_best_of_n_spreads_over_nodes_and_lands_the_winner_exactly(
    cluster: dict[str, Any], tmp_path: Path, notes: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    runner = RayRunner()
    # a timeout makes every candidate a killable process of its own (not a thread)
    outcome = BestOfN(indexed(scored_writer, str(notes)), n=8, timeout=60, runner=runner)(ws)

    nodes = {r.node_id for r in outcome.all_results}
    assert len(nodes) == 2 and None not in nodes
    assert outcome.committed and outcome.winner is not None
    assert outcome.winner.branch_index == 5 and outcome.winner.status == "committed"
    assert [r.status for r in outcome.all_results].count("committed") == 1

    # the same candidates run locally land the same tree
    local_ws = Workspace(make_tree(tmp_path / "local"))
    local_notes = tmp_path / "local-notes"
    local_notes.mkdir()
    local = BestOfN(indexed(scored_writer, str(local_notes)), n=8)(local_ws)
    assert local.winner is not None and local.winner.branch_index == 5
    assert tree_state(ws.path) == tree_state(local_ws.path)

    # losers (and the winner) left nothing on any node
    assert _wait_dead(_pids(notes)) == []
    assert _our_mounts(cluster["base"]) == []
    assert _open_branch_dirs(cluster["caches"]) == []
    ws.close()
    local_ws.close()


def test_rollouts_report_the_best_on_the_cluster_without_committing(
    cluster: dict[str, Any], tmp_path: Path, notes: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    before = tree_state(ws.path)
    outcome = BestOfN(indexed(scored_writer, str(notes)), n=8, commit=False,
                      runner=RayRunner())(ws)
    assert not outcome.committed
    assert outcome.winner is not None and outcome.winner.branch_index == 5
    assert outcome.winner.success and outcome.winner.node_id is not None
    assert tree_state(ws.path) == before
    ws.close()


def test_deletes_renames_modes_symlinks_and_binaries_round_trip(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    outcome = Speculate([all_edits], runner=RayRunner())(ws)
    assert outcome.committed, outcome.all_results
    expected = make_tree(tmp_path / "expected")
    edit_everything(expected)
    assert tree_state(ws.path) == tree_state(expected)
    assert (ws.path / ".pydantic-deep" / "state.json").read_text() == "{}"
    ws.close()


def test_speculate_kills_the_loser_on_the_other_node(
    cluster: dict[str, Any], tmp_path: Path, notes: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    runner = RayRunner(kill_grace=20.0)  # a loaded machine must not turn this into a force-kill
    outcome = Speculate([bind(sleeper, str(notes), 120.0), bind(quick_after, str(notes), 1)],
                        runner=runner)(ws)
    slow, fast = outcome.all_results
    assert fast.status == "committed" and slow.status == "lost_race"
    assert not slow.success
    # each ran on its own node (one CPU each), and the loser's node is known too
    assert slow.node_id is not None and fast.node_id is not None
    assert slow.node_id != fast.node_id
    assert (ws.path / "fast.txt").exists() and not (ws.path / "slow.txt").exists()
    # the loser's candidate process died with its cancel (no force needed)
    assert _wait_dead(_pids(notes)) == []
    assert runner.stats["forced_kills"] == 0
    assert _our_mounts(cluster["base"]) == []
    assert _open_branch_dirs(cluster["caches"]) == []
    ws.close()


def test_a_force_killed_worker_leaves_no_candidate_running(
    cluster: dict[str, Any], tmp_path: Path, notes: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    runner = RayRunner(kill_grace=0.0)  # force-kill the worker at once, maybe before it cleans up
    outcome = Speculate([bind(sleeper, str(notes), 120.0), bind(quick_after, str(notes), 1)],
                        runner=runner)(ws)
    assert [r.status for r in outcome.all_results] == ["lost_race", "committed"]
    assert runner.stats["forced_kills"] == 1
    assert _wait_dead(_pids(notes)) == []
    assert _our_mounts(cluster["base"]) == []
    ws.close()


def in_sandbox(path: Path) -> bool:
    groups = Path("/proc/self/cgroup").read_text()
    (Path(path) / "cgroup.txt").write_text(groups)
    return "/forkdeck/" in groups


def test_resource_limits_put_candidates_in_the_sandbox_on_their_node(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    from branching_core.sandbox import ResourceLimits, leftover_branch_cgroups, sandbox_available
    from tests.sandbox.conftest import cgroup_limits_unavailable

    ok, why = sandbox_available()
    if not ok:
        pytest.skip(f"no sandbox here: {why}")
    no_cgroups = cgroup_limits_unavailable()
    if no_cgroups is not None:  # a normal user without a delegated cgroup
        pytest.skip(f"cgroup limits unavailable: {no_cgroups}")
    before = set(leftover_branch_cgroups())
    ws = Workspace(make_tree(tmp_path / "ws"))
    outcome = BestOfN([in_sandbox] * 2,
                      resource_limits=ResourceLimits(memory="256M", pids=64),
                      runner=RayRunner())(ws)
    assert outcome.committed, [r.exception for r in outcome.all_results]
    assert "/forkdeck/" in (ws.path / "cgroup.txt").read_text()
    assert set(leftover_branch_cgroups()) - before == set()
    ws.close()


class _DeafHandle:
    def run(self, timeout: float | None) -> bool:
        time.sleep(120)  # ignores the timeout it was given
        return True

    def kill(self) -> None:
        """Cannot be stopped: only killing the worker ends it."""


class DeafLauncher:
    """A launcher candidate (like the CLI's command candidates) whose handle ignores
    its timeout: the node cannot enforce it, so the driver's backstop must."""

    def launch(self, branch: Any) -> _DeafHandle:
        return _DeafHandle()

    def __call__(self, path: Path) -> bool:
        raise TypeError("launched, not called")


def test_the_driver_force_cancels_a_task_its_node_did_not_stop_in_time(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    runner = RayRunner(timeout_margin=1.0)
    outcome = BestOfN([DeafLauncher()], timeout=1.0, runner=runner)(ws)
    (res,) = outcome.all_results
    assert res.status == "timed_out" and not res.success
    assert "force-cancelled" in str(res.exception)
    assert runner.stats["forced_kills"] == 1
    ws.close()


def test_a_candidate_timeout_is_enforced_on_its_node(
    cluster: dict[str, Any], tmp_path: Path, notes: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    before = tree_state(ws.path)
    outcome = BestOfN([bind(sleeper, str(notes), 120.0), all_edits], timeout=2.0,
                      runner=RayRunner())(ws)
    slow, quick = outcome.all_results
    assert slow.status == "timed_out" and not slow.success
    assert quick.status == "committed"
    assert slow.node_id is not None  # it ran, and reported back from its node
    assert _wait_dead(_pids(notes)) == []
    assert tree_state(ws.path) != before
    ws.close()


def test_a_change_in_the_workspace_since_the_snapshot_is_a_conflict(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    changed = threading.Event()

    def progress(result: Any) -> None:  # runs on the driver as the candidate starts
        if result.status == "running" and not changed.is_set():
            (ws.path / "a.txt").write_text("edited in the workspace meanwhile\n")
            changed.set()

    outcome = Speculate([all_edits], runner=RayRunner(), progress=progress)(ws)
    assert changed.is_set()
    (res,) = outcome.all_results
    assert not outcome.committed and res.status == "failed"
    assert isinstance(res.exception, ConflictError) and "a.txt" in res.exception.paths
    # nothing of the candidate's landed
    assert (ws.path / "a.txt").read_text() == "edited in the workspace meanwhile\n"
    assert (ws.path / "gone.txt").exists() and not (ws.path / "fresh").exists()
    assert ws.open_branches() == []
    ws.close()


def test_a_snapshot_is_shipped_once_per_node_for_many_tasks(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    root = tmp_path / "big"
    for d in range(100):
        sub = root / f"d{d:03}"
        sub.mkdir(parents=True)
        for f in range(100):
            (sub / f"f{f:03}.txt").write_text(f"{d}/{f}\n")
    ws = Workspace(root)
    runner = RayRunner()
    outcome = BestOfN(indexed(lambda p, i: True), n=32, commit=False, runner=runner)(ws)
    assert all(r.success for r in outcome.all_results)
    assert runner.stats["snapshots_shipped"] == 1
    assert runner.stats["tasks"] == 32
    key = scan_key(root)
    built = []
    for cache in cluster["caches"]:
        log = cache / "materialisations.log"
        lines = log.read_text().splitlines() if log.exists() else []
        built.append(sum(1 for line in lines if line.startswith(key)))
    used = {r.node_id for r in outcome.all_results}
    assert sum(built) == len(used) == runner.stats["materialisations"]
    assert max(built) == 1
    ws.close()


def scan_key(root: Path) -> str:
    from branching_core.cluster.snapshot import manifest_hash

    return manifest_hash(scan(root))


def test_a_node_dying_mid_run_fails_its_candidates_and_the_rest_complete(
    cluster: dict[str, Any], tmp_path: Path, notes: Path,
) -> None:
    c = cluster["cluster"]
    doomed_cache = cluster["base"] / "cache-doomed"
    doomed = c.add_node(num_cpus=1, object_store_memory=OBJECT_STORE,
                        env_vars={"FORKDECK_RAY_CACHE": str(doomed_cache)})
    c.wait_for_nodes()
    ws = Workspace(make_tree(tmp_path / "ws"))
    before = tree_state(ws.path)

    def kill_when_all_run() -> None:
        end = time.monotonic() + 60
        while len(list(notes.iterdir())) < 3 and time.monotonic() < end:
            time.sleep(0.05)
        c.remove_node(doomed, allow_graceful=False)

    killer = threading.Thread(target=kill_when_all_run, daemon=True)
    killer.start()
    try:
        outcome = BestOfN([bind(sleeper, str(notes), 4.0) for _ in range(3)],
                          scores=[0.3, 0.2, 0.1], timeout=60, runner=RayRunner())(ws)
    finally:
        killer.join()
    on_doomed = [p.name.split(".")[1] for p in notes.iterdir() if p.name.endswith("cache-doomed")]
    assert len(on_doomed) == 1
    failed = [r for r in outcome.all_results if r.status == "failed"]
    assert len(failed) == 1
    assert isinstance(failed[0].exception, CandidateLost)
    assert "died" in str(failed[0].exception)
    others = [r for r in outcome.all_results if r is not failed[0]]
    assert sorted(r.status for r in others) == ["aborted", "committed"]
    assert outcome.committed
    changed = {k for k in tree_state(ws.path).keys() ^ before.keys()}
    assert changed == {"slow.txt"}
    assert _wait_dead(_pids(notes), within=15) == []
    ws.close()


def test_ray_address_is_honoured_by_the_default_runner(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    script = (
        "import ray, sys\n"
        "from branching_core.cluster import RayRunner\n"
        "RayRunner().connect()\n"
        "print(len(ray.nodes()))\n"
    )
    env = {**os.environ, "RAY_ADDRESS": cluster["cluster"].address}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    assert int(out.stdout.strip().splitlines()[-1]) >= 2


def test_cli_best_of_n_with_ray_auto_runs_commands_on_the_nodes(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    wsdir = make_tree(tmp_path / "ws")
    script = ('echo "$BRANCHING_ATTEMPT" > attempt.txt; '
              'echo "0.$((BRANCHING_ATTEMPT * 3 % 4))" >&3')
    env = {**os.environ, "RAY_ADDRESS": cluster["cluster"].address,
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-m", "branching_core.cli", "best-of-n", "--ray", "auto", "-n", "4",
         "-w", str(wsdir), "--json", "--", "sh", "-c", script],
        env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("{"), proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert [r["score"] for r in data["results"]] == [0.0, 0.3, 0.2, 0.1]
    assert data["winner"] == {"index": 1, "score": 0.3}
    assert len({r["node"] for r in data["results"]}) == 2
    assert (wsdir / "attempt.txt").read_text().strip() == "1"


LEAVES_RAY = """\
import sys
from branching_core.cli import main
rc = main(sys.argv[1:])
import ray
sys.stderr.write(f"\\nrc={rc} connected-after={ray.is_initialized()}\\n")
"""


def test_the_cli_ends_its_ray_connection_before_it_returns(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    """Ray's driver prints cluster events to stdout from a thread until it shuts down; left
    to interpreter exit, a late "node marked dead" followed the --json object on stdout
    (seen under load, after the node-death test). The CLI disconnects before it returns."""
    wsdir = make_tree(tmp_path / "ws")
    env = {**os.environ, "RAY_ADDRESS": cluster["cluster"].address,
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for mode in (["--json"], []):
        proc = subprocess.run(
            [sys.executable, "-c", LEAVES_RAY, "best-of-n", "--ray", "auto", "-n", "2",
             "-w", str(wsdir), *mode, "--", "true"],
            env=env, capture_output=True, text=True, timeout=180, check=False)
        assert "rc=0 connected-after=False" in proc.stderr, proc.stdout + proc.stderr
        if mode:
            json.loads(proc.stdout)  # one object, nothing else


def test_cli_refuses_ray_with_a_local_critique(tmp_path: Path) -> None:
    wsdir = make_tree(tmp_path / "ws")
    before = tree_state(wsdir)
    proc = subprocess.run(
        [sys.executable, "-m", "branching_core.cli", "reflexion", "--ray", "auto",
         "--critique", "true", "-w", str(wsdir), "--", "false"],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert "cannot be combined with --ray" in proc.stderr
    assert tree_state(wsdir) == before


def fails_until_told(path: Path, feedback: list[str]) -> tuple[bool, str]:
    """Cascaded: the first wave fails with a message; a later one reads it and succeeds."""
    if not feedback:
        return False, "use the word banana"
    (Path(path) / "answer.txt").write_text(feedback[0])
    return True, ""


def retry_with_feedback(path: Path, attempt: int, feedback: str | None) -> bool:
    if feedback is None:
        raise RuntimeError("first try fails")
    (Path(path) / "fixed.txt").write_text(feedback)
    return True


def test_cascaded_and_reflexion_carry_feedback_across_nodes(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    runner = RayRunner()
    outcome = Cascaded(fails_until_told, fan_out=(1, 2), runner=runner)(ws)
    assert outcome.committed
    assert (ws.path / "answer.txt").read_text() == "use the word banana"
    outcome = Reflexion(retry_with_feedback, max_retries=2, runner=runner)(ws)
    assert [r.status for r in outcome.all_results] == ["failed", "committed"]
    assert "first try fails" in (ws.path / "fixed.txt").read_text()
    ws.close()


def test_the_overall_timeout_cancels_candidates_on_their_nodes(
    cluster: dict[str, Any], tmp_path: Path, notes: Path,
) -> None:
    ws = Workspace(make_tree(tmp_path / "ws"))
    before = tree_state(ws.path)
    outcome = Speculate([bind(sleeper, str(notes), 120.0)] * 2, overall_timeout=3.0,
                        runner=RayRunner(kill_grace=20.0))(ws)
    assert [r.status for r in outcome.all_results] == ["timed_out", "timed_out"]
    assert not outcome.committed and tree_state(ws.path) == before
    assert _wait_dead(_pids(notes)) == []
    # the cancelled tasks abort their branches (the next test counts what is left)
    assert _await_no_branch_dirs(cluster["caches"]) == []
    ws.close()


class _ProcessHandle:
    """A started candidate process, as a command candidate's ``launch`` returns one."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid

    def run(self, timeout: float | None) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


class SlowToStart:
    """A candidate whose start takes 8 s after its process exists (a slow sandbox start
    on a busy node): the driver's cancel, 4 s in, arrives while it is starting."""

    def __init__(self, notes: str) -> None:
        self.notes = notes

    def launch(self, branch: Any) -> _ProcessHandle:
        proc = subprocess.Popen(["sleep", "120"], cwd=branch.path, start_new_session=True)
        Path(self.notes, f"started.{proc.pid}.x").write_text("")
        time.sleep(8.0)
        return _ProcessHandle(proc)

    def __call__(self, path: Any) -> Any:  # launched, never called
        raise AssertionError("launched, not called")


def test_a_cancel_while_a_candidate_starts_kills_it_and_aborts_its_branch(
    cluster: dict[str, Any], tmp_path: Path, notes: Path,
) -> None:
    """Ray's plain cancel is a KeyboardInterrupt raised at whatever line the task runs:
    landing between the candidate's start and the line that keeps its handle, it left
    the candidate running on the node. The task defers it to the candidate's wait.

    A task that a busy node has not started by the cancel is dropped by Ray before it
    runs and starts nothing (with a 1 s timeout that happened in CI), so the test asks
    for at least one start inside the window, and every start killed."""
    ws = Workspace(make_tree(tmp_path / "ws"))
    before = tree_state(ws.path)
    outcome = Speculate([SlowToStart(str(notes))] * 2, overall_timeout=4.0,
                        runner=RayRunner(kill_grace=20.0))(ws)
    assert [r.status for r in outcome.all_results] == ["timed_out", "timed_out"]
    assert not outcome.committed and tree_state(ws.path) == before
    assert len(_pids(notes)) >= 1
    assert _wait_dead(_pids(notes), within=30.0) == []
    assert _await_no_branch_dirs(cluster["caches"]) == []
    ws.close()


def on_which_thread(path: Path, i: int) -> tuple[bool, float]:
    """Writes whether it ran on the task's main thread (where Ray's cancel lands)."""
    main = threading.current_thread() is threading.main_thread()
    (Path(path) / f"thread{i}.txt").write_text("main" if main else "other")
    return True, float(i)


def test_a_killable_free_candidate_runs_on_the_tasks_own_thread(
    cluster: dict[str, Any], tmp_path: Path,
) -> None:
    """No timeout, no race, no isolation: the candidate runs on the task's main thread
    (no waiter thread beside it), and its delta, score and cleanup are as before."""
    ws = Workspace(make_tree(tmp_path / "ws"))
    outcome = BestOfN(on_which_thread, n=2, runner=RayRunner())(ws)
    assert outcome.committed and outcome.winner is not None
    assert outcome.winner.branch_index == 1
    assert (ws.path / "thread1.txt").read_text() == "main"
    assert not (ws.path / "thread0.txt").exists()
    assert _open_branch_dirs(cluster["caches"]) == []
    ws.close()


def slice_sleeper(path: Path, notes: str, seconds: float) -> bool:
    _note(notes, "sleeper")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)
    (Path(path) / "slow.txt").write_text("slow\n")
    return True


def test_ctrl_c_while_a_single_candidate_runs_cancels_it_on_its_node(
    cluster: dict[str, Any], tmp_path: Path, notes: Path,
) -> None:
    """A pattern's single remote candidate is waited for on the calling thread (no thread
    start per call): a Ctrl-C there must still cancel the task on its node (the candidate
    stops, its branch is aborted) and propagate, as it did with a waiter thread."""
    ws = Workspace(make_tree(tmp_path / "ws"))
    before = tree_state(ws.path)
    main = threading.main_thread().ident
    assert main is not None
    stop = threading.Event()

    def interrupt_once_it_runs() -> None:
        while not stop.is_set():
            if any(n.startswith("sleeper") for n in os.listdir(notes)):
                signal.pthread_kill(main, signal.SIGINT)
                return
            time.sleep(0.02)

    interrupter = threading.Thread(target=interrupt_once_it_runs, daemon=True)
    # (in short sleeps: Ray's plain cancel is raised between bytecodes, not in a sleep)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            BestOfN([bind(slice_sleeper, str(notes), 120.0)],
                    runner=RayRunner(kill_grace=20.0))(ws)
    finally:
        stop.set()
        interrupter.join(5)
    assert tree_state(ws.path) == before
    # aborted on the node well before the candidate's 120 s: it was stopped, not left
    assert _await_no_branch_dirs(cluster["caches"]) == []
    ws.close()
