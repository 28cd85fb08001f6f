# pyright: strict
"""The body of one candidate task on a Ray node.

It takes the node's cached copy of the snapshot (building it once per node, see
``node_cache``), branches it copy-on-write with the ordinary ``Workspace``, runs the
candidate there exactly as the local runner would (a fork, the sandbox with the
same ``ResourceLimits``, or a command candidate's own sandbox), enforces the
per-candidate timeout on the node (the handle kills the whole process tree), and
returns a ``TaskReport``: the value, the delta and where it ran, never the tree.
Whatever way it ends (success, failure, timeout, a cancel from the driver), the
branch is aborted and the candidate's processes are dead before it returns.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from branching_core.cluster.cancel_shield import CancelShield
from branching_core.cluster.delta import Delta, collect
from branching_core.cluster.node_cache import acquire, cache_root
from branching_core.cluster.snapshot import Manifest

Blobs = dict[str, tuple[int, int, int]]

_WORKSPACES: dict[str, Any] = {}
_WS_LOCK = threading.Lock()


@dataclass
class ShippedSnapshot:
    """What a task receives: the snapshot key and object refs to its parts.

    ``meta`` (manifest and blob index) and ``packs`` are object refs held inside
    this object, so Ray does not resolve them when the task starts: only a node
    that has to materialise the snapshot fetches them, once.
    """

    key: str
    meta: Any  # ObjectRef of (manifest, blobs)
    packs: list[Any]
    cache_dir: str | None
    cache_bytes: int


@dataclass
class TaskReport:
    node_id: str
    materialised: bool
    outcome: str  # "ok" | "error" | "timed_out"
    value: Any = None
    error: BaseException | None = None
    score: float | None = None
    delta: Delta = field(default_factory=Delta)
    run_seconds: float = 0.0


def fetchers(
    snap: ShippedSnapshot,
) -> tuple[Callable[[], tuple[Manifest, Blobs]], Callable[[int], bytes]]:
    """How a node fetches the snapshot's parts from the object store (only when it has
    to materialise them: ``node_cache.acquire`` calls these once per node)."""
    import ray

    def meta() -> tuple[Manifest, Blobs]:
        return cast("tuple[Manifest, Blobs]", ray.get(snap.meta))

    def pack(index: int) -> bytes:
        return cast(bytes, ray.get(snap.packs[index]))

    return meta, pack


def workspace_on(tree: Path, store: Path) -> Any:
    """The (per-process) ``Workspace`` opened on a cached snapshot tree."""
    from branching_core.workspace import Workspace

    with _WS_LOCK:
        ws = _WORKSPACES.get(str(tree))
        if ws is None or not tree.exists():
            ws = Workspace(tree, store=store)
            _WORKSPACES[str(tree)] = ws
        return ws


def _start(fn: Any, branch: Any, mode: str, limits: Any) -> Any:
    """The same choice as locally: a thread only when nothing could need to kill the
    candidate (no timeout, no race, no isolation); a cancel then waits for the
    runner's ``kill_grace`` and force-kills the worker. Forking a Ray worker costs
    tens of milliseconds, so the thread matters for rollouts."""
    from branching_core.patterns._proc import ChildProcessHandle, SandboxHandle, ThreadHandle

    launch = getattr(fn, "launch", None)
    if launch is not None:
        return launch(branch)
    if mode == "sandbox":
        return SandboxHandle(fn, branch.path, limits)
    if mode == "thread":
        return ThreadHandle(fn, branch.path)
    return ChildProcessHandle(fn, branch.path)


def _inline(fn: Any, mode: str, timeout: float | None) -> bool:
    """Run the candidate on the task's own (main) thread? Yes for a thread-mode callable
    with no timeout: nothing could kill a thread anyway, and Ray's plain cancel (a
    ``KeyboardInterrupt`` on this thread) then stops the candidate itself instead of a
    waiter beside it. Saves two thread starts per task (~1-2 ms on a loaded node)."""
    return mode == "thread" and timeout is None and getattr(fn, "launch", None) is None


def _wait(handle: Any, timeout: float | None) -> Any:
    """``handle.run(timeout)``, waited for in short slices on this (the task's main)
    thread: Ray's plain cancel is a ``KeyboardInterrupt`` that Python delivers only
    between bytecodes, so a thread blocked in one long wait would never see it."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = handle.run(timeout)
        except BaseException as exc:
            box["error"] = exc

    waiter = threading.Thread(target=body, daemon=True, name="forkdeck-candidate")
    waiter.start()
    try:
        while waiter.is_alive():
            waiter.join(0.05)
    except BaseException:
        handle.kill()  # the whole candidate tree dies; then its waiter returns
        waiter.join(10.0)
        raise
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _record(root: Path, handle: Any) -> Path | None:
    """Note a forked candidate's process group, so a sweep can kill it should this
    worker be force-killed (a sandboxed candidate dies with its caller by itself)."""
    pid = getattr(handle, "pid", None)
    if not isinstance(pid, int):
        return None
    running = root / "running"
    running.mkdir(exist_ok=True)
    note = running / f"{os.getpid()}.{pid}"
    note.touch()
    return note


def sweep(root: Path) -> int:
    """Kill the process groups of candidates whose worker died; returns how many."""
    killed = 0
    running = root / "running"
    if not running.is_dir():
        return 0
    for note in running.iterdir():
        try:
            worker, pgid = (int(x) for x in note.name.split("."))
        except ValueError:
            continue
        if os.path.exists(f"/proc/{worker}"):
            continue
        try:
            os.killpg(pgid, signal.SIGKILL)
            killed += 1
        except (ProcessLookupError, PermissionError):
            pass
        note.unlink(missing_ok=True)
    return killed


def sweep_node(cache_dir: str | None) -> tuple[str, int]:
    """A task pinned to one node after a force-kill there: leave nothing running."""
    import ray

    return ray.get_runtime_context().get_node_id(), sweep(cache_root(cache_dir))


def run_candidate(
    snap: ShippedSnapshot,
    name: str,
    fn: Any,
    mode: str,
    limits: Any,
    timeout: float | None,
    evaluate: Any,
) -> TaskReport:
    import ray

    from branching_core.patterns._proc import CandidateTimeout, unwrap

    with CancelShield() as shield:  # a cancel may stop the candidate, never the cleanup
        node_id = ray.get_runtime_context().get_node_id()
        root = cache_root(snap.cache_dir)
        sweep(root)  # whatever a force-killed worker left behind on this node
        held = acquire(root, snap.key, *fetchers(snap), snap.cache_bytes)
        report = TaskReport(node_id=node_id, materialised=held.materialised, outcome="ok")
        try:
            ws = workspace_on(held.tree, held.store)
            branch = ws.branch(name, on_success=None, on_error=None)
            handle = None
            note = None
            try:
                started = time.monotonic()
                try:
                    if _inline(fn, mode, timeout):
                        with shield.cancellable():
                            report.value = fn(branch.path)
                    else:
                        shield.check()  # cancelled during setup: nothing starts
                        handle = _start(fn, branch, mode, limits)
                        note = _record(root, handle)
                        with shield.cancellable():
                            report.value = _wait(handle, timeout)
                except CandidateTimeout as exc:
                    report.outcome, report.error = "timed_out", exc
                except Exception as exc:
                    report.outcome, report.error = "error", unwrap(exc)
                report.run_seconds = time.monotonic() - started
                if report.outcome == "ok":
                    if evaluate is not None:
                        with shield.cancellable():
                            report.score = float(evaluate(branch.path))
                    report.delta = collect(branch, held.tree)
            finally:
                # Shielded: a cancel raised above lands here, a later one is deferred.
                if handle is not None:
                    with contextlib.suppress(Exception):
                        handle.kill()
                if note is not None:
                    note.unlink(missing_ok=True)
                if branch.is_open:
                    branch.abort()
        finally:
            held.release()
    return report


__all__ = ["ShippedSnapshot", "TaskReport", "fetchers", "run_candidate", "sweep", "sweep_node",
           "workspace_on"]
