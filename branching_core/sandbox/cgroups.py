"""Per-branch cgroups: a v2 driver and a v1 driver behind one small interface.

Each controller a limit needs is placed on cgroup v2 when our own v2 cgroup
delegates it to children (``cgroup.subtree_control``), else on its v1 hierarchy
(hybrid hosts such as this one keep memory, cpu and pids on v1). Branch cgroups
live in ``<our cgroup>/forkdeck/<branch>`` so they are accounted inside whatever
the caller is already confined to, and are removed when the branch ends.

A caller killed outright (SIGKILL, OOM) cannot remove its branch cgroups, so each name
carries its owner: ``b<pid-namespace inode>.<pid>.<start time>-<n>-<random>``. The first
limited branch of every process sweeps the cgroups whose owner is provably dead (same
pid namespace, and that pid gone or started at another time); other live sessions'
cgroups, and names it cannot judge, are left alone.

Nothing is ever silently skipped: a limit that cannot be written and read back
raises ``ResourceLimitError`` naming the controller, the path and the reason.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from branching_core.errors import PathNotFoundError, ResourceLimitError, SystemCallError
from branching_core.sandbox.limits import ResourceLimits

PARENT_NAME = "forkdeck"
CPU_PERIOD_US = 100_000
_counter = itertools.count()
_NAME_RE = re.compile(r"^b(\d+)\.(\d+)\.(\d+)-\d+-[0-9a-f]+$")
_OLD_NAME_RE = re.compile(r"^b(\d+)-\d+-[0-9a-f]+$")  # before owners were named fully
_swept_in: set[int] = set()  # pids of processes that already swept (a fork sweeps again)
_sweep_lock = threading.Lock()


def _start_time(pid: int | str) -> int | None:
    """The process's start time in clock ticks since boot; None if there is no such pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(data[data.rindex(b")") + 2:].split()[19])


def _pid_namespace() -> int:
    return os.stat("/proc/self/ns/pid").st_ino


def owner_tag() -> str:
    """``<pid-namespace inode>.<pid>.<start time>``: who made a branch cgroup."""
    pid = os.getpid()
    return f"{_pid_namespace()}.{pid}.{_start_time(pid)}"


def owner_pid(name: str) -> int | None:
    """The pid that made the branch cgroup called ``name`` (None: not a branch cgroup)."""
    match = _NAME_RE.match(name)
    if match is not None:
        return int(match.group(2))
    old = _OLD_NAME_RE.match(name)
    return int(old.group(1)) if old is not None else None


def _owner_dead(name: str, our_ns: int) -> bool:
    match = _NAME_RE.match(name)
    if match is not None:
        ns, pid, start = (int(g) for g in match.groups())
        if ns != our_ns:
            return False  # a pid in another namespace means nothing here
        return _start_time(pid) != start
    old = _OLD_NAME_RE.match(name)
    return old is not None and _start_time(old.group(1)) is None


@dataclass(frozen=True)
class CgroupMounts:
    """Where this process's cgroups are: the v2 directory and each v1 controller's."""

    v2_dir: Path | None
    v1_dirs: dict[str, Path]

    @classmethod
    def discover(cls) -> CgroupMounts:
        v2_mount: Path | None = None
        v1_mounts: dict[str, Path] = {}
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields = left.split()
                rfields = right.split()
                if len(fields) < 5 or len(rfields) < 3:
                    continue
                mount_point = Path(fields[4].replace("\\040", " "))
                fstype, options = rfields[0], rfields[2].split(",")
                if fstype == "cgroup2" and v2_mount is None:
                    v2_mount = mount_point
                elif fstype == "cgroup":
                    for opt in options:
                        if opt in {"memory", "cpu", "cpuacct", "pids", "cpuset", "freezer"}:
                            v1_mounts.setdefault(opt, mount_point)
        v2_dir: Path | None = None
        v1_dirs: dict[str, Path] = {}
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            for line in fh:
                hid, controllers, path = line.rstrip("\n").split(":", 2)
                rel = path.lstrip("/")
                if hid == "0" and controllers == "":
                    if v2_mount is not None:
                        v2_dir = v2_mount / rel
                    continue
                for ctrl in controllers.split(","):
                    if ctrl in v1_mounts:
                        v1_dirs[ctrl] = v1_mounts[ctrl] / rel
        return cls(v2_dir, v1_dirs)

    def v2_delegated(self) -> set[str]:
        """Controllers our v2 cgroup hands down to new child cgroups."""
        if self.v2_dir is None:
            return set()
        try:
            return set((self.v2_dir / "cgroup.subtree_control").read_text().split())
        except OSError:
            return set()


@dataclass
class _Placement:
    controller: str
    version: int
    path: Path


@dataclass
class BranchCgroups:
    """The cgroups of one branch; the child joins ``procs_files`` before it runs anything."""

    placements: list[_Placement] = field(default_factory=list[_Placement])
    removed: bool = False

    @property
    def procs_files(self) -> list[str]:
        """The files the (single-threaded) keeper writes ``0`` to, to join each cgroup.

        On v1 that is ``tasks``, which moves only the writing thread: a whole-process
        move (``cgroup.procs``) takes the kernel's global ``cgroup_threadgroup_rwsem``
        for writing, which waits for an RCU grace period (about 9 ms here) and blocks
        every ``fork`` on the host meanwhile (the caller's start loop included). For a
        process of one thread, as the keeper is, both put it in the same place.
        """
        seen: list[str] = []
        for p in self.placements:
            name = str(p.path / ("tasks" if p.version == 1 else "cgroup.procs"))
            if name not in seen:
                seen.append(name)
        return seen

    @property
    def paths(self) -> list[Path]:
        out: list[Path] = []
        for p in self.placements:
            if p.path not in out:
                out.append(p.path)
        return out

    def describe(self) -> str:
        return ", ".join(f"{p.controller}: v{p.version} {p.path}" for p in self.placements)

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed something in the branch's memory cgroup."""
        for p in self.placements:
            if p.controller != "memory":
                continue
            name = "memory.events" if p.version == 2 else "memory.oom_control"
            try:
                for line in (p.path / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
            except (OSError, ValueError):
                continue
        return False

    def kill(self) -> None:
        """Kill every task in the branch's cgroups (v2 ``cgroup.kill``; v1 via the task list)."""
        for path in self.paths:
            kill_file = path / "cgroup.kill"
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
                continue
            with contextlib.suppress(OSError):
                for pid in (path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), 9)

    def remove(self, timeout: float = 2.0) -> None:
        """Remove the branch cgroups, waiting briefly for exiting tasks to leave them."""
        if self.removed:
            return
        deadline = time.monotonic() + timeout
        for path in self.paths:
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                        break
                    self.kill()
                    time.sleep(0.005)
            with contextlib.suppress(OSError):
                os.rmdir(path.parent)  # the shared forkdeck parent, once no branch uses it
        self.removed = True


def _write(path: Path, value: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(value)


def _make_dir(parent: Path, name: str, *, v2_enable: list[str] | None = None) -> Path:
    """Create ``parent/forkdeck/name``; retries when a concurrent branch removed the parent."""
    for _ in range(5):
        try:
            base = parent / PARENT_NAME
            with contextlib.suppress(FileExistsError):
                os.mkdir(base)
            if v2_enable:
                _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in v2_enable))
            path = base / name
            os.mkdir(path)
            return path
        except FileNotFoundError:
            continue
    raise PathNotFoundError(errno.ENOENT, "cgroup parent keeps disappearing", str(parent))


def _apply_v1(ctrl: str, path: Path, limits: ResourceLimits) -> None:
    if ctrl == "memory":
        limit = limits.memory_bytes
        assert limit is not None
        _write(path / "memory.limit_in_bytes", str(limit))
        memsw = path / "memory.memsw.limit_in_bytes"
        if memsw.exists():  # swap accounting on: close the swap loophole as well
            _write(memsw, str(limit))
        got = int((path / "memory.limit_in_bytes").read_text())
        if got > limit + 4096 * 4:
            raise SystemCallError(
                errno.EINVAL, f"kernel kept memory.limit_in_bytes at {got}", str(path)
            )
    elif ctrl == "cpu":
        assert limits.cpu is not None
        _write(path / "cpu.cfs_period_us", str(CPU_PERIOD_US))
        quota = max(1000, int(limits.cpu * CPU_PERIOD_US))
        _write(path / "cpu.cfs_quota_us", str(quota))
        got = int((path / "cpu.cfs_quota_us").read_text())
        if got != quota:
            raise SystemCallError(errno.EINVAL, f"kernel kept cpu.cfs_quota_us at {got}", str(path))
    elif ctrl == "pids":
        assert limits.pids is not None
        _write(path / "pids.max", str(limits.pids))
        if (path / "pids.max").read_text().strip() != str(limits.pids):
            raise SystemCallError(errno.EINVAL, "kernel did not keep pids.max", str(path))


def _apply_v2(ctrl: str, path: Path, limits: ResourceLimits) -> None:
    if ctrl == "memory":
        limit = limits.memory_bytes
        assert limit is not None
        _write(path / "memory.max", str(limit))
        swap = path / "memory.swap.max"
        if swap.exists():
            _write(swap, "0")
        got = (path / "memory.max").read_text().strip()
        if got == "max" or int(got) > limit + 4096 * 4:
            raise SystemCallError(errno.EINVAL, f"kernel kept memory.max at {got}", str(path))
    elif ctrl == "cpu":
        assert limits.cpu is not None
        quota = max(1000, int(limits.cpu * CPU_PERIOD_US))
        _write(path / "cpu.max", f"{quota} {CPU_PERIOD_US}")
    elif ctrl == "pids":
        assert limits.pids is not None
        _write(path / "pids.max", str(limits.pids))


def create_branch_cgroups(
    limits: ResourceLimits, mounts: CgroupMounts | None = None
) -> BranchCgroups:
    """Create and configure the cgroups ``limits`` need, or raise ``ResourceLimitError``."""
    cgroups = BranchCgroups()
    wanted = limits.controllers()
    if not wanted:
        return cgroups
    mounts = mounts or CgroupMounts.discover()
    _sweep_once(mounts)
    name = f"b{owner_tag()}-{next(_counter)}-{secrets.token_hex(3)}"
    delegated = mounts.v2_delegated()
    v2_ctrls = [c for c in wanted if c in delegated]
    try:
        if v2_ctrls:
            assert mounts.v2_dir is not None
            path = _make_dir(mounts.v2_dir, name, v2_enable=v2_ctrls)
            for ctrl in v2_ctrls:
                cgroups.placements.append(_Placement(ctrl, 2, path))
                _apply_v2(ctrl, path, limits)
        for ctrl in wanted:
            if ctrl in v2_ctrls:
                continue
            v1_dir = mounts.v1_dirs.get(ctrl)
            if v1_dir is None:
                v2_note = (
                    "cgroup v2 is not mounted" if mounts.v2_dir is None
                    else f"cgroup v2 at {mounts.v2_dir} does not delegate it"
                    f" (subtree_control: {' '.join(sorted(delegated)) or 'empty'})"
                )
                raise ResourceLimitError(
                    f"cannot enforce the {ctrl} limit: {v2_note} and no cgroup v1 {ctrl}"
                    " hierarchy is mounted"
                )
            try:
                path = _make_dir(v1_dir, name)
            except PermissionError as exc:
                raise ResourceLimitError(
                    f"cannot enforce the {ctrl} limit: creating a cgroup under {v1_dir} was"
                    f" denied ({exc.strerror}) for uid {os.geteuid()}: the cgroup v1 {ctrl}"
                    " hierarchy is not delegated to this user, and cgroup v2 has no"
                    f" {ctrl} controller here"
                ) from exc
            cgroups.placements.append(_Placement(ctrl, 1, path))
            _apply_v1(ctrl, path, limits)
    except OSError as exc:
        cgroups.remove()
        raise ResourceLimitError(
            f"cannot enforce limits {wanted}: {exc.strerror or exc} ({exc.filename or ''})"
        ) from exc
    except BaseException:  # whatever went wrong, no half-made cgroup stays behind
        cgroups.remove()
        raise
    return cgroups


def _sweep_once(mounts: CgroupMounts) -> None:
    with _sweep_lock:
        if os.getpid() in _swept_in:
            return
        _swept_in.add(os.getpid())
    sweep_dead_branch_cgroups(mounts)


def sweep_dead_branch_cgroups(mounts: CgroupMounts | None = None) -> list[Path]:
    """Remove branch cgroups whose owner process is provably dead; returns them.

    Runs at the first limited branch of each process. A dead owner's branch tasks
    died with it (its sandboxes watch it through a pipe), so a cgroup still holding
    tasks is emptied (killed) first, as ``BranchCgroups.remove`` does.
    """
    mounts = mounts or CgroupMounts.discover()
    our_ns = _pid_namespace()
    removed: list[Path] = []
    for path in leftover_branch_cgroups(mounts):
        if _owner_dead(path.name, our_ns):
            v2 = mounts.v2_dir is not None and path.is_relative_to(mounts.v2_dir)
            BranchCgroups([_Placement("swept", 2 if v2 else 1, path)]).remove()
            if not path.exists():
                removed.append(path)
    return removed


def leftover_branch_cgroups(mounts: CgroupMounts | None = None) -> list[Path]:
    """Branch cgroups still present under every ``forkdeck`` parent (for leak checks)."""
    mounts = mounts or CgroupMounts.discover()
    roots = list(mounts.v1_dirs.values()) + ([mounts.v2_dir] if mounts.v2_dir else [])
    found: list[Path] = []
    for root in roots:
        base = root / PARENT_NAME
        if base.is_dir():
            found.extend(p for p in base.iterdir() if p.is_dir())
    return found


__all__ = [
    "BranchCgroups",
    "CgroupMounts",
    "create_branch_cgroups",
    "leftover_branch_cgroups",
    "owner_pid",
    "owner_tag",
    "sweep_dead_branch_cgroups",
]
