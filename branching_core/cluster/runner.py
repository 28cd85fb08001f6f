# pyright: strict
"""``RayRunner``: a pattern's candidates as Ray tasks on a cluster.

Per pattern call the driver snapshots the parent once (``snapshot``), puts its
packed contents in Ray's object store once, and submits one task per candidate
(``task.run_candidate``, spread over the nodes). Each task returns a delta; the
candidate's "branch" on the driver is a ``RemoteBranch`` holding that delta, and
committing it applies the delta to the real parent through a local journaled
commit (``delta.apply``), with conflict detection against the snapshot.

Killing a candidate (a race lost, the overall timeout, Ctrl-C) is
``ray.cancel``: first a plain cancel, which raises ``KeyboardInterrupt`` in the
task so it kills its process tree and aborts its branch itself, then, if the task
has not ended within ``kill_grace`` seconds, ``ray.cancel(force=True)``, which
kills the worker. The per-candidate ``timeout`` is enforced on the node by the
task (the same handles as locally: the whole tree is killed). A node that dies
mid-run makes its candidates ``failed`` with ``CandidateLost`` saying why.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from branching_core.cluster import delta as delta_mod
from branching_core.cluster._ray import import_ray
from branching_core.cluster.fork_actor import BranchHost, MakeTools
from branching_core.cluster.fork_branch import RemoteForkBranch, open_fork_branches
from branching_core.cluster.node_cache import DEFAULT_CACHE_BYTES
from branching_core.cluster.snapshot import Snapshot, pack, take
from branching_core.cluster.task import ShippedSnapshot, TaskReport, run_candidate, sweep_node
from branching_core.errors import (
    BranchingError,
    ConflictError,
    InvalidArgumentError,
    OperationError,
    UnsupportedError,
    error_name,
)
from branching_core.patterns._proc import CandidateTimeout


class _TaskEvent(Protocol):
    """The two fields of Ray's ``TaskState`` read here.

    Why not ``TaskState`` itself: Ray declares it with pydantic's ``dataclass(init=<expr>)``,
    whose overloads make type checkers see a bare ``PydanticDataclass`` with no fields.
    """

    start_time_ms: int | None
    node_id: str | None


def _task_events(found: object) -> list[_TaskEvent]:
    """``get_task``'s answer (one state, a list of attempts, or None) as a list."""
    states = cast("list[object]", found) if isinstance(found, list) else [found]
    return [cast(_TaskEvent, s) for s in states if s is not None]


LOCATE_WITHIN = 3.0

_RAY_STARTED_HERE: list[Any] = []  # the Ray module, once a runner's connect() initialised it


def disconnect_started_ray() -> None:
    """End the Ray driver connection a ``RayRunner`` opened in this process, if any.

    Ray's driver prints cluster events (a node "marked dead", a worker's error) to
    ``sys.stdout`` from a thread of its own until ``ray.shutdown()``, which otherwise runs
    at interpreter exit, after a front door that owns stdout (``--json``) has stopped
    redirecting it. A connection the caller opened itself is left alone.
    """
    while _RAY_STARTED_HERE:
        ray = _RAY_STARTED_HERE.pop()
        if ray.is_initialized():
            ray.shutdown()


def _get_task() -> Any:
    """``ray.util.state.get_task`` (imported when needed: the state API is heavy). Typed
    ``Any``: its declared answer includes Ray's ``PydanticDataclass`` (see ``_TaskEvent``)."""
    return importlib.import_module("ray.util.state").get_task


class CandidateLost(BranchingError):
    """The candidate's task ended without a result: its node or worker died."""


class RemoteBranch:
    """The driver's side of a candidate's branch on a node: its delta, once done."""

    path = None  # the tree lives on the node; only the delta comes back

    def __init__(self, session: _RaySession, name: str) -> None:
        self.session = session
        self.name = name
        self.cluster_node_id: str | None = None
        self.delta: delta_mod.Delta | None = None
        self.score: float | None = None
        self.materialised = False
        self._state = "open"

    @property
    def is_open(self) -> bool:
        return self._state == "open"

    def commit(self) -> None:
        """Apply this candidate's delta to the real parent (all or nothing)."""
        session = self.session
        with session.commit_lock:
            if self._state != "open":
                raise ConflictError(f"{self.name} is already {self._state}")
            if session.committed:
                self._state = "aborted"
                raise ConflictError(f"{self.name} lost: a sibling already committed",
                                    stale=True)
            if self.delta is None:
                raise ConflictError(f"{self.name} has no result to commit")
            try:
                delta_mod.apply(session.parent, self.delta, session.snapshot,
                                name=f"{self.name}-land")
            except BaseException:
                self._state = "aborted"
                raise
            session.committed = True
            self._state = "committed"

    def abort(self) -> None:
        self._state = "aborted"
        self.delta = None


class RemoteHandle:
    """One submitted task: ``run`` waits for its report, ``kill`` cancels it."""

    def __init__(self, session: _RaySession, branch: RemoteBranch, fn: Any, mode: str,
                 limits: Any) -> None:
        self.session = session
        self.branch = branch
        self._ray = session.ray
        self._done = threading.Event()
        self._killed = False
        self._lock = threading.Lock()
        session.in_flight.acquire()
        self._slot = True
        runner = session.runner
        self.ref = runner.submitter().remote(
            session.shipped, branch.name, fn, mode, limits, session.timeout, session.evaluate_fn,
        )

    def run(self, timeout: float | None) -> Any:
        try:
            try:
                self._wait_or_cancel()
                report = self._report()
            except BaseException as exc:
                if not isinstance(exc, Exception):  # the caller's Ctrl-C, mid-wait
                    self._interrupted()
                raise
        finally:
            self._done.set()
            self._release()
        self.session.record(report)
        self.branch.cluster_node_id = report.node_id
        self.branch.materialised = report.materialised
        if report.outcome == "timed_out":
            raise CandidateTimeout(str(report.error))
        if report.outcome == "error":
            assert report.error is not None
            raise report.error
        self.branch.delta = report.delta
        self.branch.score = report.score
        return report.value

    def _report(self) -> TaskReport:
        """The task's report (``ray.get``); a task that ended without one raises its own
        error, or ``CandidateLost`` saying why."""
        ray = self._ray
        try:
            return ray.get(self.ref)
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc, ray.exceptions.TaskCancelledError) or self._killed:
                self.branch.cluster_node_id = self._node_from_state_api()
                raise CandidateLost("cancelled") from None
            cause = getattr(exc, "cause", None)  # the task body raised: its own error
            raise (cause if isinstance(cause, BaseException) else exc) from None
        except ray.exceptions.RayError as exc:  # worker or node died, or force-cancelled
            self.branch.cluster_node_id = self._node_from_state_api()
            if self._killed:
                raise CandidateLost("cancelled") from None
            raise CandidateLost(f"its node or worker died mid-run: "
                                f"{error_name(exc)}: {_first_line(exc)}") from None

    def _interrupted(self) -> None:
        """The waiting (calling) thread was interrupted: cancel the task as a lost race
        would (its node kills the candidate and aborts the branch), and give it the
        ``kill_grace`` the threaded path's caller gives it to end before the
        interruption propagates."""
        self.kill()
        with contextlib.suppress(Exception):
            self._ray.wait([self.ref], timeout=self.session.runner.kill_grace)

    def _wait_or_cancel(self) -> None:
        """Wait for the task. The per-candidate timeout is the node's job (it kills the
        candidate's tree); the driver enforces the overall deadline, and backs the node
        up: a task still running ``timeout_margin`` seconds past its timeout (by Ray's
        own start time, so time spent queued does not count) is force-cancelled."""
        ray = self._ray
        session = self.session
        per = session.timeout
        if per is None and session.deadline is None:
            return  # nothing to enforce: ``run``'s ``ray.get`` is the wait (one call, not two)
        margin = session.runner.timeout_margin
        check_from = None if per is None else time.monotonic() + per + margin
        while True:
            waits: list[float] = []
            if session.deadline is not None:
                waits.append(session.deadline - time.monotonic())
            if check_from is not None:
                waits.append(check_from - time.monotonic())
            wait = max(0.0, min(waits)) if waits else None
            ready, _ = ray.wait([self.ref], timeout=wait)
            if ready:
                return
            now = time.monotonic()
            if session.deadline is not None and now >= session.deadline:
                self.kill()
                raise CandidateTimeout("the overall timeout passed; cancelled on its node")
            if check_from is not None and now >= check_from:
                assert per is not None
                running = self._running_for()
                if running is not None and running > per + margin:
                    self.kill(force=True)
                    raise CandidateTimeout(
                        f"still running {running:.1f} s after a {per:g} s timeout the node "
                        "did not enforce; force-cancelled"
                    )
                check_from = now + 1.0

    def _running_for(self) -> float | None:
        """Seconds since the task started running, per Ray's task events (best effort)."""
        try:
            found = _get_task()(self.ref.task_id().hex(), timeout=2)
        except Exception:
            return None
        starts = [s.start_time_ms for s in _task_events(found) if s.start_time_ms]
        return time.time() - max(starts) / 1000 if starts else None

    def _node_from_state_api(self) -> str | None:
        """Where a task that never reported ran, from Ray's task events (best effort:
        ``None`` when the dashboard is not running or has not seen the task yet)."""
        if not self.session.runner.locate_lost:
            return None
        try:
            get_task = _get_task()
        except Exception:
            return None
        end = time.monotonic() + LOCATE_WITHIN  # task events reach the GCS about once a second
        while True:
            try:
                found = get_task(self.ref.task_id().hex(), timeout=2)
            except Exception:
                return None
            nodes = [s.node_id for s in _task_events(found) if s.node_id]
            if nodes or time.monotonic() > end:
                return nodes[-1] if nodes else None
            time.sleep(0.1)

    def kill(self, *, force: bool = False) -> None:
        with self._lock:
            if self._killed or self._done.is_set():
                return
            self._killed = True
        if force:
            self.session.forced += 1
            with contextlib.suppress(Exception):
                self._ray.cancel(self.ref, force=True)
            return
        with contextlib.suppress(Exception):
            self._ray.cancel(self.ref, force=False)
        threading.Thread(target=self._force_after_grace, daemon=True).start()

    def _force_after_grace(self) -> None:
        try:
            ready, _ = self._ray.wait([self.ref], timeout=self.session.runner.kill_grace)
        except (Exception, SystemExit):
            # Ray was shut down meanwhile (its wait then raises SystemExit in this thread):
            # every task of this driver is gone with it, nothing is left to force.
            return
        if not ready:
            self.session.forced += 1
            try:
                self._ray.cancel(self.ref, force=True)
            except Exception:
                pass

    def _release(self) -> None:
        if self._slot:
            self._slot = False
            self.session.in_flight.release()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


class _RaySession:
    """One pattern call on the cluster (see ``branching_core.patterns.runners``)."""

    # a handle's ``run`` is a wait that cancels its task when interrupted: a pattern's
    # single candidate is waited for on the calling thread (``_runner._run_here``)
    waits_on_caller = True

    def __init__(self, runner: RayRunner, parent: Any, timeout: float | None,
                 deadline: float | None) -> None:
        self.runner = runner
        self.ray = runner.ray
        self.parent = parent
        self.timeout = timeout
        self.deadline = deadline
        self.evaluate_fn: Any = None
        self.commit_lock = threading.Lock()
        self.committed = False
        self.forced = 0
        limit = runner.max_in_flight or 1 << 30
        self.in_flight = threading.BoundedSemaphore(limit)
        self.snapshot, self.shipped = runner.ship(Path(parent.path))
        self._stats_lock = threading.Lock()

    def branch(self, owner: Any, name: str) -> RemoteBranch:
        if owner is not self.parent:
            raise UnsupportedError(
                "RayRunner runs one level of candidates under the workspace; nested "
                "candidates (TreeOfThoughts, BeamSearch) need LocalRunner"
            )
        return RemoteBranch(self, name)

    def branch_many(self, parent: Any, names: list[str]) -> list[RemoteBranch]:
        return [self.branch(parent, name) for name in names]

    def start(self, job: Any, branch: RemoteBranch, mode: str, limits: Any) -> RemoteHandle:
        if job.start is not None:
            raise UnsupportedError("custom start() jobs cannot run on RayRunner")
        return RemoteHandle(self, branch, job.fn, mode, limits)

    def evaluate(self, evaluate: Any, branch: RemoteBranch) -> float:
        if branch.score is None:
            raise OperationError(f"{branch.name}: evaluate did not run on its node")
        return branch.score

    def record(self, report: TaskReport) -> None:
        with self._stats_lock:
            stats = self.runner.stats
            stats["tasks"] += 1
            stats["materialisations"] += int(report.materialised)
            stats[f"node:{report.node_id}"] += 1

    def close(self) -> None:
        """After a force-kill a forked candidate may outlive its worker: sweep the
        nodes, so nothing of ours runs anywhere once the call returns."""
        with self._stats_lock:
            self.runner.stats["forced_kills"] += self.forced
        if self.forced:
            self.runner.stats["swept"] += self.runner.sweep_nodes()


class RayRunner:
    """Run pattern candidates as Ray tasks (see the module docstring).

    ``address``: ``None`` joins the Ray already initialised in this process, else
    ``ray.init()`` (which honours ``RAY_ADDRESS``, and starts a local Ray without
    it); ``"auto"`` joins the cluster this machine belongs to; ``"ray://host:10001"``
    connects through Ray Client. ``resources`` are each task's Ray resources
    (default ``{"CPU": 1}``); ``max_in_flight`` bounds the tasks submitted at once;
    ``cache_dir`` is the node-local snapshot cache (default: ``$FORKDECK_RAY_CACHE``
    on each node, else ``~/.cache/forkdeck/ray``) and ``cache_bytes`` its bound.
    ``kill_grace``: seconds a cancelled task gets to clean up before it is force-killed.
    ``locate_lost``: ask Ray's state API which node a killed or lost task ran on.
    ``timeout_margin``: how long past its ``timeout`` a task may run before the driver
    force-cancels it (the node normally kills the candidate at the timeout itself).
    ``branch_resources``: what each fork branch's actor reserves (``ForkCoordinator(...,
    runner=RayRunner())``); default none (``{"CPU": 0}``): a branch mostly waits for its
    model, and a fork's branches must not queue behind each other for a CPU.
    """

    remote = True

    def __init__(
        self,
        address: str | None = None,
        *,
        resources: dict[str, float] | None = None,
        max_in_flight: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        scheduling_strategy: Any = "SPREAD",
        runtime_env: dict[str, Any] | None = None,
        kill_grace: float = 1.0,
        locate_lost: bool = True,
        timeout_margin: float = 10.0,
        branch_resources: dict[str, float] | None = None,
    ) -> None:
        self.ray = import_ray()
        if max_in_flight is not None and max_in_flight < 1:
            raise InvalidArgumentError(f"max_in_flight must be at least 1, got {max_in_flight!r}")
        if cache_bytes < 0:
            raise InvalidArgumentError(f"cache_bytes must not be negative, got {cache_bytes!r}")
        self.address = address
        self.resources = dict(resources or {"CPU": 1})
        self.max_in_flight = max_in_flight
        self.cache_dir = None if cache_dir is None else os.fspath(cache_dir)
        self.cache_bytes = cache_bytes
        self.scheduling_strategy = scheduling_strategy
        self.runtime_env = runtime_env
        self.kill_grace = kill_grace
        self.locate_lost = locate_lost
        self.timeout_margin = timeout_margin
        self.branch_resources = dict(branch_resources or {"CPU": 0})
        self.stats: Counter[str] = Counter()
        self._remote_fn: Any = None
        self._submitter: tuple[tuple[str, int], Any] | None = None
        self._actor_cls: Any = None
        self._shipped: tuple[str, Snapshot, ShippedSnapshot] | None = None
        self._lock = threading.Lock()

    # -- the Runner protocol ------------------------------------------------------------
    def session(self, parent: Any, *, timeout: float | None = None,
                deadline: float | None = None, evaluate: Any = None) -> _RaySession:
        self.connect()
        session = _RaySession(self, parent, timeout, deadline)
        session.evaluate_fn = evaluate  # runs on the node, where the tree is
        return session

    # -- fork branches (the fork layer's "branch files" port, fork/branch_files.py) -------
    def open_fork_branches(self, parent: Any, names: Sequence[str], make_tools: MakeTools,
                           *, live_view: bool = False) -> list[RemoteForkBranch]:
        """One actor per fork branch, each owning that branch's files on a node
        (``fork_branch``); ``make_tools(path)`` builds the branch's tools there."""
        return open_fork_branches(self, parent, names, make_tools, live_view=live_view)

    def branch_actor_class(self) -> Any:
        if self._actor_cls is None:
            self._actor_cls = self.ray.remote(max_restarts=0, max_task_retries=0)(BranchHost)
        return self._actor_cls

    def actor_options(self) -> dict[str, Any]:
        """A branch actor's Ray options: ``branch_resources`` and the scheduling strategy."""
        return self.task_options(self.branch_resources)

    # -- Ray plumbing ---------------------------------------------------------------------
    def connect(self) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        ray.init(address=self.address, runtime_env=self.runtime_env,
                 ignore_reinit_error=True, log_to_driver=False)
        _RAY_STARTED_HERE.append(ray)

    @property
    def remote_fn(self) -> Any:
        if self._remote_fn is None:
            self._remote_fn = self.ray.remote(max_retries=0)(run_candidate)
        return self._remote_fn

    def submitter(self) -> Any:
        """``remote_fn`` with this runner's task options, made once per set of options
        (``.options()`` builds a new wrapper each call: ~0.05 ms of every submission)."""
        key = (repr(sorted(self.resources.items())), id(self.scheduling_strategy))
        if self._submitter is None or self._submitter[0] != key:
            self._submitter = (key, self.remote_fn.options(**self.task_options()))
        return self._submitter[1]

    def task_options(self, resources: dict[str, float] | None = None) -> dict[str, Any]:
        res = dict(self.resources if resources is None else resources)
        opts: dict[str, Any] = {
            "num_cpus": res.pop("CPU", 1),
            "num_gpus": res.pop("GPU", 0),
            "scheduling_strategy": self.scheduling_strategy,
        }
        if "memory" in res:
            opts["memory"] = res.pop("memory")
        if res:
            opts["resources"] = res
        return opts

    def sweep_nodes(self, timeout: float = 30.0) -> int:
        """Run ``task.sweep`` once on every alive node; returns the groups it killed."""
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        fn = ray.remote(max_retries=0, num_cpus=0)(sweep_node)
        refs = [
            fn.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                node["NodeID"], soft=False)).remote(self.cache_dir)
            for node in ray.nodes() if node.get("Alive")
        ]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        killed = 0
        for ref in ready:
            try:
                killed += ray.get(ref)[1]
            except Exception:
                continue  # a node that died meanwhile has nothing of ours running
        return killed

    def ship(self, root: Path) -> tuple[Snapshot, ShippedSnapshot]:
        """Snapshot ``root``; put its contents in the object store unless the same
        snapshot (same key) was shipped last time."""
        snap = take(root)
        with self._lock:
            if self._shipped is not None and self._shipped[0] == snap.key:
                return self._shipped[1], self._shipped[2]
            pack(snap)
            ray = self.ray
            shipped = ShippedSnapshot(
                key=snap.key,
                meta=ray.put((snap.manifest, snap.blobs)),
                packs=[ray.put(p) for p in snap.packs],
                cache_dir=self.cache_dir,
                cache_bytes=self.cache_bytes,
            )
            snap.packs = []  # the object store holds them now
            self._shipped = (snap.key, snap, shipped)
            self.stats["snapshots_shipped"] += 1
            return snap, shipped

    def __repr__(self) -> str:
        return f"RayRunner(address={self.address!r})"


__all__ = ["CandidateLost", "RayRunner", "RemoteBranch", "disconnect_started_ray"]
