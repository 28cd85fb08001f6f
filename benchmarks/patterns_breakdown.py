"""Where a process-mode pattern candidate's CPU goes, phase by phase (diagnostic).

``benchmarks/patterns.py`` says *how much* the process modes cost beyond thread mode;
this says *where*: it wraps the functions each phase runs in (the caller's ``os.fork``,
``plan_sandbox``, the sandbox keeper's and init's steps) with probes that read
``getrusage`` and write one line per phase to an inherited ``O_APPEND`` fd, which works
from a forked child, a keeper and a pid-namespace init alike. Totals of children come
from ``wait4`` (a keeper's total includes its init, which it reaps). Probes cost a few
microseconds each; the figures are per candidate, averaged over the runs.

A phase whose function no longer exists (the sandbox's keeper and init are being
rewritten) is reported as missing rather than failing the run.

``--one-fork`` also runs a measurement-only prototype of a callable sandbox forked
*once* from the caller (the forking thread unshares ``CLONE_NEWPID`` for its children,
forks the init directly and ``setns``es back; the init joins the view's mount namespace,
unshares the others and builds the same filesystem) beside ``BranchContext`` (keeper
plus init, two forks of the caller), same branches, same run. It lacks what a real
implementation needs (cgroups, output capture, the lifeline that kills the sandbox
when the caller dies, setup-error records) and runs only as root without a user
namespace; it is here to size the keeper's cost, not to be used.

``--mask-memo`` measures what the patterns' per-batch mask plan (``shared_mask_plan``)
still saves now that ``secret_masks()`` and ``plan_socket_hiding()`` keep validated
caches of their own: 16-candidate ``isolate_processes`` batches with and without it,
alternating, same run.

    /work/venv/bin/python benchmarks/patterns_breakdown.py [--runs 5] [--one-fork]
                                                           [--mask-memo]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import pickle
import resource
import select
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branching_core.patterns import BestOfN
from branching_core.workspace import Workspace, reaper

_FD = 987  # the probe's record fd, inherited by every child


def _usage() -> tuple[float, int]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime + ru.ru_stime) * 1e6, ru.ru_minflt


def _thread_usage() -> tuple[float, int]:
    ru = resource.getrusage(resource.RUSAGE_THREAD)
    return (ru.ru_utime + ru.ru_stime) * 1e6, ru.ru_minflt


def _record(phase: str, cpu_us: float, faults: int) -> None:
    with contextlib.suppress(OSError):
        os.write(_FD, f"{phase}\t{cpu_us:.0f}\t{faults}\n".encode())


class Probes:
    """Installs the phase probes while in use (``with Probes(path) as p``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.main = os.getpid()
        self.undo: list[tuple[Any, str, Any]] = []
        self.missing: list[str] = []
        self.forked: set[int] = set()

    def __enter__(self) -> Probes:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, _FD, inheritable=True)
        os.close(fd)
        from branching_core.sandbox import _spawn, context

        self._patch(os, "fork", self._fork_probe)
        self._patch(os, "waitpid", self._reap_probe)
        self._patch(os, "_exit", _exit_probe)
        self._patch(context, "plan_sandbox",
                    lambda orig: self._caller_timed("caller: plan_sandbox", orig))
        self._patch(_spawn.SpawnedProcess, "start_drain",
                    lambda orig: self._caller_timed("caller: output-drain thread start", orig))
        self._patch(_spawn, "enter_namespaces",
                    lambda orig: _timed("keeper: enter_namespaces (unshare, id maps)", orig))
        self._patch(_spawn, "build_filesystem",
                    lambda orig: _timed("init: build_filesystem (mounts, ctypes)", orig))
        self._patch(_spawn, "finish_isolation",
                    lambda orig: _timed("init: finish_isolation (hostname, lo, caps)", orig))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, orig in reversed(self.undo):
            setattr(owner, name, orig)
        os.close(_FD)

    def _patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        orig = getattr(owner, name, None)
        if orig is None:
            self.missing.append(f"{getattr(owner, '__name__', owner)}.{name}")
            return
        setattr(owner, name, make(orig))
        self.undo.append((owner, name, orig))

    def _caller_timed(self, phase: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        def probe(*args: Any, **kwargs: Any) -> Any:
            cpu0, flt0 = _thread_usage()
            try:
                return orig(*args, **kwargs)
            finally:
                cpu1, flt1 = _thread_usage()
                _record(phase, cpu1 - cpu0, flt1 - flt0)

        return probe

    def _fork_probe(self, orig: Callable[[], int]) -> Callable[[], int]:
        """The forking side's CPU (``fork`` itself, the at-fork hooks, the faults they
        take) and the child's usage at its first Python line (the kernel's part of the
        fork in the child, Python's after-fork work, the faults of both)."""
        main, forked = self.main, self.forked

        def probe() -> int:
            in_caller = os.getpid() == main
            cpu0, flt0 = _thread_usage() if in_caller else _usage()
            pid = orig()
            if pid == 0:
                _ROLE[0] = "child of the caller" if in_caller else "init"
                _record("child of the caller: usage at its first line" if in_caller
                        else "init: usage at its first line (forked by the keeper)", *_usage())
                return 0
            cpu1, flt1 = _thread_usage() if in_caller else _usage()
            if in_caller:
                forked.add(pid)
            _record("caller: os.fork" if in_caller else "keeper: os.fork of the init",
                    cpu1 - cpu0, flt1 - flt0)
            return pid

        return probe

    def _reap_probe(self, orig: Callable[[int, int], tuple[int, int]]
                    ) -> Callable[[int, int], tuple[int, int]]:
        """Whole-life usage of the children we probe (``wait4``): a keeper's includes its
        init's, which it reaps before it exits."""
        main, forked = self.main, self.forked

        def probe(pid: int, options: int) -> tuple[int, int]:
            in_caller = os.getpid() == main
            if options != 0 or (in_caller and pid not in forked):
                return orig(pid, options)
            got, status, ru = os.wait4(pid, 0)
            _record("child of the caller: whole life (a keeper: with its init)" if in_caller
                    else "init: whole life (reaped by the keeper)",
                    (ru.ru_utime + ru.ru_stime) * 1e6, ru.ru_minflt)
            return got, status

        return probe

    def read(self) -> dict[str, list[tuple[float, int]]]:
        phases: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
        for line in self.path.read_text().splitlines():
            phase, cpu, faults = line.split("\t")
            phases[phase].append((float(cpu), int(faults)))
        return phases


def _timed(phase: str, orig: Callable[..., Any]) -> Callable[..., Any]:
    def probe(*args: Any, **kwargs: Any) -> Any:
        cpu0, flt0 = _usage()
        try:
            return orig(*args, **kwargs)
        finally:
            cpu1, flt1 = _usage()
            _record(phase, cpu1 - cpu0, flt1 - flt0)

    return probe


_ROLE = ["caller"]


def _exit_probe(orig: Callable[[int], Any]) -> Callable[[int], Any]:
    """A child's usage when it calls ``os._exit``: its whole life minus this is the
    kernel tearing its copy of the caller's address space down."""

    def probe(code: int) -> Any:
        if _ROLE[0] != "caller":
            _record(f"{_ROLE[0]}: usage at os._exit", *_usage())
        return orig(code)

    return probe


def _work(path: Path) -> tuple[bool, float]:
    cpu0, flt0 = _usage()
    t0 = time.monotonic()
    time.sleep(0.05)
    (path / "out.txt").write_text("x")
    if os.getpid() != _MAIN[0]:
        _record("candidate: its own work (sleep, write a file)", *(
            a - b for a, b in zip(_usage(), (cpu0, flt0), strict=True)))
    return True, time.monotonic() - t0


_MAIN = [os.getpid()]


def breakdown(ws: Workspace, runs: int, scratch: Path, sandbox: bool) -> list[tuple[str, str]]:
    """Rows (mode, phase table in markdown) for 16-candidate BestOfN batches."""
    _MAIN[0] = os.getpid()
    modes: list[tuple[str, dict[str, Any]]] = [("timeout=30 (fork)", {"timeout": 30})]
    if sandbox:
        modes.append(("isolate_processes (sandbox)", {"isolate_processes": True}))
    out = []
    for label, options in modes:
        BestOfN([_work] * 16, **options)(ws)  # warm-up, unprobed
        with Probes(scratch / "probe.tsv") as probes:
            for _ in range(runs):
                BestOfN([_work] * 16, **options)(ws)
        reaper.drain(timeout=60)
        per = runs * 16
        lines = ["| phase | CPU per candidate | page faults |", "|---|---:|---:|"]
        phases = probes.read()
        totals = {phase: (sum(c for c, _ in samples) / per, sum(f for _, f in samples) / per)
                  for phase, samples in phases.items()}
        whole, init = (totals.get("child of the caller: whole life (a keeper: with its init)"),
                       totals.get("init: whole life (reaped by the keeper)"))
        if whole is not None and init is not None:
            totals["keeper: whole life without its init (derived)"] = (
                whole[0] - init[0], round(whole[1] - init[1]))
        for phase, (cpu, faults) in sorted(totals.items()):
            n = len(phases.get(phase, ()))
            lines.append(f"| {phase}{f' (n={n})' if n else ''} | {cpu / 1000:.2f} ms "
                         f"| {faults:.0f} |")
        if probes.missing:
            lines.append(f"| not probed (gone): {', '.join(probes.missing)} | | |")
        out.append((label, "\n".join(lines)))
    return out


# -- the one-fork prototype (measurement only) ---------------------------------------------
def _one_fork_sandbox(fn: Callable[[str], bool], path: str, own_pidns: int) -> tuple[int, int, int]:
    from branching_core.sandbox import _syscalls as sc
    from branching_core.sandbox.namespaces import build_filesystem, finish_isolation, plan_sandbox

    plan = plan_sandbox(path, network=False, mount_at=None)
    r, w = os.pipe2(os.O_CLOEXEC)
    sc.unshare(sc.CLONE_NEWPID)  # this thread's children only
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the init
            try:
                sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
                os.setsid()
                if plan.mntns_fd is not None:
                    sc.setns(plan.mntns_fd, sc.CLONE_NEWNS)
                sc.unshare(sc.CLONE_NEWNS | sc.CLONE_NEWIPC | sc.CLONE_NEWUTS | sc.CLONE_NEWNET)
                build_filesystem(plan)
                finish_isolation(plan)
                os.write(w, pickle.dumps(fn(plan.target)))
                os._exit(0)
            except BaseException as exc:
                os.write(2, f"one-fork prototype: {exc!r}\n".encode())
                os._exit(3)
    finally:
        sc.setns(own_pidns, sc.CLONE_NEWPID)
    os.close(w)
    plan.close_fds()
    return pid, os.pidfd_open(pid), r


def _sandboxed_work(path: str) -> bool:
    time.sleep(0.05)
    (Path(path) / "out.txt").write_text("x")
    return True


def one_fork_comparison(ws: Workspace, runs: int) -> list[tuple[str, str]]:
    from branching_core.sandbox import BranchContext
    from branching_core.sandbox.namespaces import shared_mask_plan

    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    branches = ws.branch_many([f"one-fork-{i}" for i in range(16)], on_success=None,
                              on_error=None)
    paths = [str(b.path) for b in branches]

    def prototype() -> None:
        with shared_mask_plan():
            procs = [_one_fork_sandbox(_sandboxed_work, p, own_pidns) for p in paths]
        poller = select.poll()
        left = {pidfd: (pid, r) for pid, pidfd, r in procs}
        for pidfd in left:
            poller.register(pidfd, select.POLLIN)
        while left:
            for fd, _ in poller.poll():
                pid, r = left.pop(fd)
                poller.unregister(fd)
                _, status = os.waitpid(pid, 0)
                ok = pickle.loads(os.read(r, 1 << 16)) if status == 0 else False
                os.close(r)
                os.close(fd)
                if ok is not True:
                    raise RuntimeError(f"prototype sandbox failed (status {status})")

    def current() -> None:
        with shared_mask_plan():
            contexts = [BranchContext(_sandboxed_work, p) for p in paths]
        for ctx in contexts:
            if ctx.wait(30) is not True:
                raise RuntimeError("BranchContext failed")

    samples: dict[str, tuple[list[float], list[float]]] = {}
    try:
        for _ in range(runs):
            for name, run in (("BranchContext: keeper + init (two forks of the caller)", current),
                              ("prototype: the init forked once, no keeper", prototype)):
                run()
                cpu0, t0 = _cpu(), time.monotonic()
                for _ in range(3):
                    run()
                wall, cpu = (time.monotonic() - t0) / 3 - 0.05, (_cpu() - cpu0) / 3
                samples.setdefault(name, ([], []))[0].append(wall)
                samples[name][1].append(cpu)
    finally:
        for branch in branches:
            branch.abort()
        os.close(own_pidns)
    return [(name, f"16 sandboxes of a 50 ms callable: wall beyond 50 ms p50 "
                   f"{statistics.median(w) * 1000:.0f} ms, CPU per 16 (caller + children) "
                   f"{statistics.median(c) * 1000:.0f} ms")
            for name, (w, c) in samples.items()]


def mask_memo_comparison(ws: Workspace, runs: int) -> list[tuple[str, str]]:
    from branching_core.sandbox import context, namespaces

    memo = namespaces.shared_mask_plan
    planning: list[float] = []
    plan = context.plan_sandbox

    def timed_plan(*args: Any, **kwargs: Any) -> Any:
        cpu0 = time.thread_time()
        try:
            return plan(*args, **kwargs)
        finally:
            planning.append(time.thread_time() - cpu0)

    variants = (("with shared_mask_plan (today)", memo),
                ("validated caches only", contextlib.nullcontext))
    figures: dict[str, tuple[list[float], list[float], list[float]]] = {
        name: ([], [], []) for name, _ in variants}
    context.plan_sandbox = timed_plan  # type: ignore[assignment]
    try:
        for _ in range(runs):
            for name, batch_memo in variants:
                namespaces.shared_mask_plan = batch_memo  # type: ignore[assignment]
                BestOfN([_work] * 16, isolate_processes=True)(ws)  # settles the caches
                planning.clear()
                cpu0, t0 = _cpu(), time.monotonic()
                outcome = BestOfN([_work] * 16, isolate_processes=True)(ws)
                own = max(r.return_value[1] for r in outcome.all_results if r.return_value)
                figures[name][0].append(time.monotonic() - t0 - own)
                figures[name][1].append(_cpu() - cpu0)
                figures[name][2].append(sum(planning) / len(planning))
    finally:
        namespaces.shared_mask_plan = memo  # type: ignore[assignment]
        context.plan_sandbox = plan  # type: ignore[assignment]
    return [(name, f"overhead p50 {statistics.median(w) * 1000:.0f} ms, CPU per call "
                   f"{statistics.median(c) * 1000:.0f} ms, caller's plan_sandbox "
                   f"{statistics.median(p) * 1e6:.0f} us per candidate")
            for name, (w, c, p) in figures.items()]


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@contextlib.contextmanager
def _workspace(backend: str) -> Iterator[tuple[Workspace, Path]]:
    scratch = Path(tempfile.mkdtemp(prefix="forkdeck-breakdown-"))
    root = scratch / "ws"
    root.mkdir()
    (root / "seed.txt").write_text("seed")
    ws = Workspace(root, backend=backend)
    try:
        yield ws, scratch
    finally:
        reaper.drain(timeout=60)
        ws.close()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    from branching_core.sandbox import sandbox_available

    ap = argparse.ArgumentParser(description=(__doc__ or "breakdown").splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--mask-memo", action="store_true",
                    help="also 16 sandboxes with and without the per-batch mask plan")
    ap.add_argument("--one-fork", action="store_true",
                    help="also compare BranchContext with the one-fork prototype (root only)")
    args = ap.parse_args()
    sandbox = sandbox_available()[0]
    print(f"load: {os.getloadavg()[0]:.2f}; cpus: {os.cpu_count()}; sandbox: {sandbox}\n")
    with _workspace(args.backend) as (ws, scratch):
        for label, table in breakdown(ws, args.runs, scratch, sandbox):
            print(f"### {label}\n\n{table}\n")
        if args.mask_memo and sandbox:
            print("### the per-batch mask plan, with and without (isolate_processes)\n")
            for name, figure in mask_memo_comparison(ws, args.runs):
                print(f"* {name}: {figure}")
            print()
        if args.one_fork and sandbox and os.geteuid() == 0:
            print("### callable sandbox: keeper + init vs one fork (prototype)\n")
            for name, figure in one_fork_comparison(ws, args.runs):
                print(f"* {name}: {figure}")


if __name__ == "__main__":
    main()
