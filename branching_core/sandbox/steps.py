"""The sandbox's filesystem as an explicit list of steps, decided once in the caller.

``plan_sandbox`` decides *what* to hide, keep and show; ``compile_steps`` turns that
decision into the exact mount operations the sandbox's init performs, in order. Two
executors run the same list: ``run_steps`` here (the Python init, which callables
need: they run in a fork of the caller) and the native init (``native/``, which
commands use). So what a sandbox hides is decided in one place, and the tests that
prove it run against both executors.

Every step has a small header that makes it conditional at run time, for what the
caller cannot know: ``need`` (skip when that fd slot is empty: a kept directory gone
since planning), ``when`` with ``when_path`` (``dir``: an existing directory that is
no symlink; ``exists``; ``file``: exists and is no directory; ``missing``: does not
exist), and ``missing_ok`` (ENOENT skips the step; a slot it would fill stays empty).
Slots are small integers naming fds the steps open and later use.

Only ``os`` and the ctypes syscalls run here: the init is a fork of a possibly
multi-threaded caller.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from branching_core.errors import SystemCallError
from branching_core.sandbox import _syscalls as sc
from branching_core.sandbox.host_sockets import EMPTY_DIR, SocketPlan
from branching_core.sandbox.masks import inside

if TYPE_CHECKING:
    from branching_core.sandbox.namespaces import SandboxPlan

# Per-operation argument kinds ("s": string, "i": integer), after the common header.
OPS: dict[str, str] = {
    "private": "",  # mount(NULL, "/", MS_REC | MS_PRIVATE)
    "clone": "isi",  # slot, path, recursive: open_tree(OPEN_TREE_CLONE)
    "opath": "is",  # slot, path: open(O_PATH | O_DIRECTORY)
    "setattr": "siii",  # path, set, clear, recursive: mount_setattr
    "setattr_fd": "iiii",  # slot, set, clear, recursive
    "mount": "sssis",  # source, target, fstype, flags, data
    "overlay": "sis",  # target, lower slot (-1: the target itself), empty second layer
    "kept": "siss",  # target, slot, stage source, empty layer: bind/overlay, else ro clone
    "move": "is",  # slot, target: move_mount
    "mkdir": "si",  # path, mode
    "ensure_dir": "s",  # path: makedirs (a mount point on the read-only host)
    "rmdir": "s",
    "touch": "sii",  # path, mode, exclusive: create an empty file with exactly ``mode``
    "symlink": "ss",  # target, path
    "unlink": "s",
    "umount": "si",  # path, flags
    "close": "i",  # slot
    "chdir": "s",
}
WHEN = ("", "dir", "exists", "file", "missing")


@dataclass(frozen=True)
class SandboxStep:
    """One operation of the init; ``args`` match ``OPS[op]``."""

    op: str
    args: tuple[str | int, ...] = ()
    need: int = -1
    when: str = ""
    when_path: str = ""
    missing_ok: bool = False


_RO = sc.MOUNT_ATTR_RDONLY | sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_DEV_STAGE = "/tmp/.forkdeck-dev"
_MASK_FILE = "/dev/.forkdeck-masked"  # on the sandbox's /dev tmpfs; unlinked after binding
# The overlay stages' mount (one stage per host mount, ``_compile_shared``): a tmpfs on
# the sandbox's /dev while the binds are made, then moved over /proc and covered by the
# new /proc (mode 0: nothing of it is ever reachable by path from the sandbox).
_STAGE_HOLDER = "/dev/.forkdeck-stages"
_HOLDER_FLAGS = sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC

# What container runtimes protect in /proc: host-wide knobs are read-only (uid 0 without
# capabilities is stopped by file modes alone: /proc/irq/*/smp_affinity is 0600 root),
# kernel memory, keyrings and timer internals are masked. /proc/pressure is read-only
# too: its files are world-writable (PSI triggers) and host-wide.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs",
                  "/proc/pressure")
PROC_MASKED = ("/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/timer_list",
               "/proc/timer_stats", "/proc/latency_stats", "/proc/sched_debug", "/proc/scsi",
               "/proc/acpi", "/proc/asound")


class _Compiler:
    def __init__(self) -> None:
        self.steps: list[SandboxStep] = []
        self.slots = 0

    def add(self, op: str, *args: str | int, need: int = -1, when: str = "",
            when_path: str = "", missing_ok: bool = False) -> None:
        self.steps.append(SandboxStep(op, args, need, when, when_path, missing_ok))

    def slot(self) -> int:
        self.slots += 1
        return self.slots - 1

    def mask_files(self, paths: tuple[str, ...], mode: int) -> None:
        """Bind an empty read-only file (``mode``) over each of ``paths`` that exists
        and is no directory. Mode 0 makes reading fail even for the sandbox's uid 0."""
        if not paths:
            return
        self.add("touch", _MASK_FILE, mode, 1)
        for path in paths:
            self.add("mount", _MASK_FILE, path, "", sc.MS_BIND, "", when="file",
                     when_path=path)
            self.add("setattr", path, _RO, 0, 0, when="file", when_path=path)
        self.add("unlink", _MASK_FILE)


def compile_steps(plan: SandboxPlan) -> CompiledSteps:
    """The init's filesystem work for ``plan``: a read-only world with one writable view.

    Everything inherited is read-only, nosuid, nodev; the branch view is the only
    writable host path; ``/tmp`` is a private tmpfs; ``/dev`` a tmpfs with a few device
    nodes and a private ``/dev/shm``; ``/proc`` the new pid namespace's with host-wide
    parts read-only or masked; without network ``/run`` is private and host sockets are
    covered; stores and secrets are hidden; kept and shown paths come back read-only.
    A pure function of the plan's decisions (nothing is looked up here), so sandboxes
    with the same decisions share one compiled list (the same object: ``native``
    caches its encoding by identity), and sandboxes of other views the same decisions
    share most of it (``CompiledSteps``).
    """
    # Without a user namespace of our own (a root caller) one overlay per *mount* serves
    # every directory on it (a bind from that stage costs far less than an overlay);
    # in a user namespace a mount with locked children cannot be a layer.
    share = plan.sockets is not None and not plan.new_userns and plan.userns_fd is None
    sockets = plan.sockets
    if sockets is not None:
        sockets = _decisive(sockets, plan.keep_visible if share else None)
    return _compile(plan.view, plan.target, plan.keep_visible, plan.hide_dirs,
                    plan.hide_files, plan.show_files, sockets, plan.private_run, share,
                    plan.expose, plan.pty)


def _decisive(sockets: SocketPlan, kept: tuple[str, ...] | None) -> SocketPlan:
    """``sockets`` with only the mount points the compiled steps depend on (``kept``:
    the kept directories, when stages are shared; ``None``: no stage, no mount point).

    The steps ask of the mount points only which mount holds, and whether a mount lies
    below, an overlaid or kept directory. Every other mount point (a sibling branch's
    view, mounted and unmounted in the stores all the time, a test's tmpfs under
    ``/tmp``) decides nothing: left in, each new one made every sandbox compile its
    steps afresh (a cache miss in ``_compile_shared``, then in the executors' caches
    by identity: ~0.5 ms of each start) although they came out the same.
    """
    if kept is None:
        return SocketPlan(sockets.overlay_dirs, sockets.socket_files) if sockets.mount_points \
            else sockets
    above, below = _around((*sockets.overlay_dirs, *kept))
    points = tuple(p for p in sockets.mount_points if p in above or p.startswith(below))
    if points == sockets.mount_points:
        return sockets
    return SocketPlan(sockets.overlay_dirs, sockets.socket_files, points)


@functools.lru_cache(maxsize=32)
def _around(paths: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Every ancestor of ``paths`` (and each itself), and the prefixes below them."""
    above: set[str] = set()
    for path in paths:
        while path not in above:
            above.add(path)
            if path == "/":
                break
            path = os.path.dirname(path)
    return frozenset(above), tuple(path.rstrip("/") + "/" for path in paths)


class CompiledSteps(tuple[SandboxStep, ...]):
    """A compiled list: a plain tuple of steps to whatever reads it, made of ``parts``.

    Most of a sandbox's steps do not depend on its view (its masks, ``/dev``, ``/proc``):
    sibling branches, each a new view, share those parts (the same objects), so the
    executors convert them once (``prepare_steps`` here, the request encoding in ``native``)
    and a new branch pays only for its few own steps.
    """

    parts: tuple[tuple[SandboxStep, ...], ...]

    def __new__(cls, *parts: tuple[SandboxStep, ...]) -> CompiledSteps:
        self = super().__new__(cls, (step for part in parts for step in part))
        self.parts = parts
        return self


_VIEW = 0  # the view's slot: grabbed first, moved into place last


@functools.lru_cache(maxsize=32)
def _compile(view_path: str, target: str, keep_visible: tuple[str, ...],
             hide_dirs: tuple[str, ...], hide_files: tuple[str, ...],
             show_files: tuple[str, ...], sockets: SocketPlan | None, private_run: bool,
             share: bool, expose: tuple[tuple[str, bool, bool], ...] = (),
             pty: bool = False) -> CompiledSteps:
    # Grab the view (and kept dirs, shown files, the mounts stages are made from) before
    # anything covers them: they may live under /tmp or /run.
    head = (SandboxStep("private"), SandboxStep("clone", (_VIEW, view_path, 1)))
    holds_target = tuple(inside(target, (path,)) for path in hide_dirs)
    shared, tail = _compile_shared(keep_visible, hide_dirs, hide_files, show_files, sockets,
                                   private_run, share, expose, pty, holds_target)
    view = (SandboxStep("ensure_dir", (target,)),
            SandboxStep("setattr_fd", (_VIEW, sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV, 0, 1)),
            SandboxStep("move", (_VIEW, target)))
    return CompiledSteps(head, shared, view, tail, (SandboxStep("chdir", (target,)),))


@functools.lru_cache(maxsize=32)
def _compile_shared(keep_visible: tuple[str, ...], hide_dirs: tuple[str, ...],
                    hide_files: tuple[str, ...], show_files: tuple[str, ...],
                    sockets: SocketPlan | None, private_run: bool, share: bool,
                    expose: tuple[tuple[str, bool, bool], ...], pty: bool,
                    holds_target: tuple[bool, ...],
                    ) -> tuple[tuple[SandboxStep, ...], tuple[SandboxStep, ...]]:
    """The steps between grabbing the view and moving it into place, and those after
    (the late read-only passes, the fds closed), for every view with these decisions
    (``holds_target``: which hidden directories the view's mount point lies in)."""
    c = _Compiler()
    c.slots = _VIEW + 1
    # Kept dirs: with sockets hidden they come back as overlays of an fd taken now (one
    # mount, and their sockets stay unreachable), else as read-only clones.
    kept: list[tuple[str, int]] = []
    for path in keep_visible:
        slot = c.slot()
        if sockets is not None:
            c.add("opath", slot, path, missing_ok=True)
        else:
            c.add("clone", slot, path, 1, missing_ok=True)
        kept.append((path, slot))
    mount_slots: dict[str, int] = {}
    if sockets is not None and share:
        for path in (*sockets.overlay_dirs, *keep_visible):
            mount = sockets.containing_mount(path)
            if mount not in mount_slots:
                mount_slots[mount] = c.slot()
                c.add("opath", mount_slots[mount], mount)
    shown: list[tuple[str, int]] = []
    for path in show_files:
        slot = c.slot()
        c.add("clone", slot, path, 0)
        shown.append((path, slot))
    # Exposed paths (an agent's own session directory in the masked home): grabbed now,
    # like the view, and mounted back at their own path once the masks are in place.
    exposed: list[tuple[str, bool, bool, int]] = []
    for path, writable, is_dir in expose:
        slot = c.slot()
        c.add("clone", slot, path, 1, missing_ok=True)
        exposed.append((path, writable, is_dir, slot))
    stages: dict[str, str] = {}

    def stage_for(path: str) -> str:
        """The stage to bind ``path`` from ("" for an overlay of its own), made on first use."""
        if sockets is None or not share or sockets.has_mount_below(path):
            return ""
        mount = sockets.containing_mount(path)
        stage = stages.get(mount)
        if stage is None:
            if not stages:  # the stages' holder: moved under the new /proc at the end
                c.add("mkdir", _STAGE_HOLDER, 0)
                c.add("mount", "tmpfs", _STAGE_HOLDER, "tmpfs", _HOLDER_FLAGS, "mode=0,size=4k")
            stage = stages[mount] = f"{_STAGE_HOLDER}/{len(stages)}"
            c.add("mkdir", stage, 0)
            c.add("overlay", stage, mount_slots[mount], EMPTY_DIR)
        return stage + (path if mount == "/" else path[len(mount):])

    c.add("setattr", "/", _RO, 0, 1)
    c.add("mount", "tmpfs", "/tmp", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=1777")
    _compile_dev(c, pty)
    if private_run:
        c.add("mount", "tmpfs", "/run", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=755")
    if sockets is not None:
        c.add("mkdir", EMPTY_DIR, 0o555)
        # A directory that vanished since the plan is skipped; one that appeared is not
        # covered (a residual race, like a socket made later in a walked directory).
        for path in sockets.overlay_dirs:
            source = stage_for(path)
            if source:
                c.add("mount", source, path, "", sc.MS_BIND, "", missing_ok=True)
            else:
                c.add("overlay", path, -1, EMPTY_DIR, missing_ok=True)
        for path in sockets.socket_files:
            c.add("mount", "/dev/null", path, "", sc.MS_BIND, "", missing_ok=True)
    # After the overlays: an overlay of a parent directory would cover these mounts. A
    # hidden dir that will hold mount points (the view, kept dirs) stays writable until
    # they are made, then becomes read-only.
    inner = (*keep_visible, *show_files, *(entry[0] for entry in expose))
    late: list[int] = []
    flags = sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC
    for path, holds in zip(hide_dirs, holds_target, strict=True):
        needed = holds or any(inside(p, (path,)) for p in inner)
        c.add("mount", "tmpfs", path, "tmpfs", flags | (0 if needed else sc.MS_RDONLY),
              "size=64k,mode=755", when="dir", when_path=path)
        if needed:  # an fd of the tmpfs just made: only a hide that happened is finished
            late.append(c.slot())
            c.add("opath", late[-1], path, when="dir", when_path=path)
    c.mask_files(hide_files, 0o000)  # reading a secret fails (EACCES)
    for path, slot in kept:
        c.add("ensure_dir", path, need=slot)
        if sockets is not None:
            c.add("kept", path, slot, stage_for(path), EMPTY_DIR, need=slot)
        else:
            c.add("setattr_fd", slot, _RO, 0, 1, need=slot)
            c.add("move", slot, path, need=slot)
    for path, slot in shown:
        c.add("ensure_dir", os.path.dirname(path))
        c.add("touch", path, 0o444, 0, when="missing", when_path=path)
        c.add("setattr_fd", slot, _RO, 0, 0)
        c.add("move", slot, path)
    for path, writable, is_dir, slot in exposed:
        # The mount point: a directory for a directory, an empty file for a file.
        if is_dir:
            c.add("ensure_dir", path, need=slot)
        else:
            c.add("ensure_dir", os.path.dirname(path), need=slot)
            c.add("touch", path, 0o600, 0, need=slot, when="missing", when_path=path)
        attrs = sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV
        c.add("setattr_fd", slot, attrs if writable else _RO, 0, 1, need=slot)
        c.add("move", slot, path, need=slot)
    if stages:
        # The binds keep what they show. The stages are not unmounted (the first unmount
        # in a namespace copied from the view helper's waits for an RCU grace period:
        # 0.4-5 ms of every sandbox start): their holder is moved over /proc, where the
        # new /proc covers it. Covered, it is unreachable as the old /proc is (removing
        # the mount on top needs CAP_SYS_ADMIN, which the sandbox has dropped), and it
        # goes with the namespace when the sandbox ends, off its start.
        c.add("mount", _STAGE_HOLDER, "/proc", "", sc.MS_MOVE, "")
        c.add("rmdir", _STAGE_HOLDER)
    _compile_proc(c)
    if sockets is not None:
        c.add("rmdir", EMPTY_DIR)  # the overlays keep their reference to it
    shared = tuple(c.steps)
    c.steps = []
    # (here the view is moved into place)
    for slot in late:  # read-only only now: the view's mount point was made in it
        c.add("setattr_fd", slot, _RO, 0, 0, need=slot)
    for slot in range(c.slots):
        c.add("close", slot)
    return shared, tuple(c.steps)


def _compile_dev(c: _Compiler, pty: bool = False) -> None:
    """A tmpfs /dev with a few device binds, fd links and a private shm, built on a
    stage under the new /tmp and moved over /dev whole. ``pty``: also a private devpts
    instance (``/dev/pts``, ``/dev/ptmx``), so the sandbox can open pseudo-terminals of
    its own (an external agent runs on one) without reaching the host's."""
    c.add("mkdir", _DEV_STAGE, 0o755)
    c.add("mount", "tmpfs", _DEV_STAGE, "tmpfs", sc.MS_NOSUID | sc.MS_NOEXEC, "mode=755,size=64k")
    for name in _DEVICES:
        host = f"/dev/{name}"
        c.add("touch", f"{_DEV_STAGE}/{name}", 0o666, 0, when="exists", when_path=host)
        c.add("mount", host, f"{_DEV_STAGE}/{name}", "", sc.MS_BIND, "", when="exists",
              when_path=host)
    # The device binds inherited nodev from the recursive read-only pass; allow them.
    c.add("setattr", _DEV_STAGE, 0, sc.MOUNT_ATTR_NODEV, 1)
    for name, dest in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                       ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        c.add("symlink", dest, f"{_DEV_STAGE}/{name}")
    c.add("mkdir", f"{_DEV_STAGE}/shm", 0o1777)
    c.add("mount", "tmpfs", f"{_DEV_STAGE}/shm", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=1777")
    if pty:
        c.add("mkdir", f"{_DEV_STAGE}/pts", 0o755)
        c.add("mount", "devpts", f"{_DEV_STAGE}/pts", "devpts", sc.MS_NOSUID | sc.MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620")
        c.add("symlink", "pts/ptmx", f"{_DEV_STAGE}/ptmx")
    c.add("mount", _DEV_STAGE, "/dev", "", sc.MS_MOVE, "")
    c.add("rmdir", _DEV_STAGE)


def _compile_proc(c: _Compiler) -> None:
    """The new pid namespace's /proc, with the host-wide parts read-only or masked."""
    c.add("mount", "proc", "/proc", "proc", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC, "")
    for path in PROC_READ_ONLY:
        c.add("mount", path, path, "", sc.MS_BIND | sc.MS_REC, "", when="exists",
              when_path=path)
        c.add("setattr", path, _RO, 0, 1, when="exists", when_path=path)
    hidden = sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC
    for path in PROC_MASKED:
        c.add("mount", "tmpfs", path, "tmpfs", hidden, "size=4k,mode=555", when="dir",
              when_path=path)
    c.mask_files(PROC_MASKED, 0o444)


# -- the Python executor ------------------------------------------------------------------


def _holds(when: str, path: str) -> bool:
    """Whether ``path`` meets ``when`` (``WHEN``), in one or two system calls."""
    if not when:
        return True
    try:
        if when == "exists":
            os.stat(path)
            return True
        if when == "missing":
            os.stat(path)
            return False
        mode = os.lstat(path).st_mode
    except OSError:
        return when == "missing"
    if when == "dir":  # a directory, not a link to one
        return stat.S_ISDIR(mode)
    if when == "file":  # there, and no directory (nor a link to one)
        if not stat.S_ISLNK(mode):
            return not stat.S_ISDIR(mode)
        try:
            return not stat.S_ISDIR(os.stat(path).st_mode)
        except OSError:
            return True  # a dangling link
    raise SystemCallError(errno.EINVAL, f"unknown sandbox step condition {when!r}")


def run_steps(steps: tuple[SandboxStep, ...]) -> None:
    """Perform ``steps`` in this process (the sandbox's Python init).

    Raises ``OSError`` (with the path) on the first step that fails. A condition that
    the step before had too (a bind and its read-only pass on the same path: the
    compiler pairs them) is not checked again: a mount or ``mount_setattr`` on a path
    does not change whether it exists or what type it is.
    """
    slots: dict[int, int] = {}
    last: tuple[str, str, bool] | None = None
    try:
        for op, args, need, when, when_path, missing_ok in _program(steps):
            if need >= 0 and slots.get(need, -1) < 0:
                continue
            if when:
                if last is not None and last[0] == when and last[1] == when_path:
                    holds = last[2]
                else:
                    holds = _holds(when, when_path)
                last = (when, when_path, holds) if op in _KEEPS_CONDITIONS else None
                if not holds:
                    continue
            else:
                last = None
            try:
                op(args, slots)
            except FileNotFoundError:
                if not missing_ok:
                    raise
                if op is _clone or op is _opath:
                    slots[int(args[0])] = -1
    finally:
        for fd in slots.values():
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass


_Op = Callable[[tuple[Any, ...], dict[int, int]], None]
_Program = tuple[tuple[_Op, tuple[Any, ...], int, str, str, bool], ...]
_programs: dict[int, tuple[tuple[SandboxStep, ...], _Program]] = {}


def prepare_steps(steps: tuple[SandboxStep, ...]) -> None:
    """Turn ``steps`` into what ``run_steps`` performs, in the caller before it forks
    (cached by identity: ``compile_steps`` shares its lists), so the init does not."""
    _program(steps)


def _program(steps: tuple[SandboxStep, ...]) -> _Program:
    """What ``run_steps`` performs for ``steps``: cached by identity, and a compiled
    list's shared parts converted once for every view (``CompiledSteps``)."""
    cached = _programs.get(id(steps))
    if cached is not None and cached[0] is steps:
        return cached[1]
    if isinstance(steps, CompiledSteps):  # a view's own few steps are converted afresh
        program = tuple(entry for part in steps.parts
                        for entry in (_program(part) if len(part) > 8 else _convert(part)))
    else:
        program = _convert(steps)
    if len(_programs) >= 64:
        _programs.clear()
    _programs[id(steps)] = (steps, program)  # holds the tuple: its id stays unique
    return program


def _convert(steps: tuple[SandboxStep, ...]) -> _Program:
    return tuple((_OPS[step.op], _converted(step), step.need, step.when, step.when_path,
                  step.missing_ok) for step in steps)


def _converted(step: SandboxStep) -> tuple[Any, ...]:
    """The step's arguments as the calls take them: ``i`` an int, ``s`` a str (``None``
    for an empty optional mount argument)."""
    kinds = OPS.get(step.op)
    if kinds is None or len(kinds) != len(step.args):
        raise SystemCallError(errno.EINVAL, f"malformed sandbox step {step.op} {step.args!r}")
    out: list[Any] = []
    for k, (kind, arg) in enumerate(zip(kinds, step.args, strict=True)):
        if kind == "i":
            out.append(int(arg))
        elif step.op == "mount" and k in (0, 2, 4) and not arg:
            out.append(None)
        else:
            out.append(str(arg))
    return tuple(out)


def _overlay(target: str, lower_fd: int, empty: str) -> None:
    own = -1
    if lower_fd < 0:
        own = lower_fd = os.open(target, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW
                                 | os.O_CLOEXEC)
    try:
        sc.mount("overlay", target, "overlay", sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV,
                 f"lowerdir=/proc/self/fd/{lower_fd}:{empty}")
    finally:
        if own >= 0:
            os.close(own)


def _private(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)


def _clone(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    slots[a[0]] = sc.open_tree_clone(a[1], recursive=bool(a[2]))


def _opath(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    slots[a[0]] = os.open(a[1], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)


def _setattr(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    sc.mount_setattr(a[0], set_=a[1], clear=a[2], recursive=bool(a[3]))


def _setattr_fd(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    sc.mount_setattr("", dirfd=slots[a[0]], empty_path=True, set_=a[1], clear=a[2],
                     recursive=bool(a[3]))


def _mount(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    sc.mount(a[0], a[1], a[2], a[3], a[4])


def _overlay_op(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    _overlay(a[0], slots[a[1]] if a[1] >= 0 else -1, a[2])


def _kept(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    _show_kept(a[0], slots[a[1]], a[2], a[3])


def _move(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    sc.move_mount_fd(slots[a[0]], a[1])


def _mkdir(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    os.mkdir(a[0], a[1])


def _ensure_dir_op(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    _ensure_dir(a[0])


def _rmdir(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    os.rmdir(a[0])


def _touch(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    fd = os.open(a[0], os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC | (os.O_EXCL if a[2] else 0),
                 a[1])
    try:
        os.fchmod(fd, a[1])  # whatever the umask
    finally:
        os.close(fd)


def _symlink(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    os.symlink(a[0], a[1])


def _unlink(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    os.unlink(a[0])


def _umount(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    sc.umount2(a[0], a[1])


def _close(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    fd = slots.pop(a[0], -1)
    if fd >= 0:
        os.close(fd)


def _chdir(a: tuple[Any, ...], slots: dict[int, int]) -> None:
    os.chdir(a[0])


# The Python executor's operation per ``OPS`` entry (the C executor's is ``run_one``).
_OPS: dict[str, _Op] = {
    "private": _private, "clone": _clone, "opath": _opath, "setattr": _setattr,
    "setattr_fd": _setattr_fd, "mount": _mount, "overlay": _overlay_op, "kept": _kept,
    "move": _move, "mkdir": _mkdir, "ensure_dir": _ensure_dir_op, "rmdir": _rmdir,
    "touch": _touch, "symlink": _symlink, "unlink": _unlink, "umount": _umount,
    "close": _close, "chdir": _chdir,
}
# Operations that leave whether a path exists, and its type, as they were.
_KEEPS_CONDITIONS = frozenset({_mount, _setattr})


def _show_kept(path: str, fd: int, stage_source: str, empty: str) -> None:
    """A kept directory back at ``path`` through the socket-hiding overlay (or a bind
    from its mount's stage); a plain read-only clone when it holds locked child mounts
    (a user namespace of our own)."""
    try:
        if stage_source:
            sc.mount(stage_source, path, None, sc.MS_BIND)
        else:
            _overlay(path, fd, empty)
        return
    except OSError:
        pass
    clone = sc.open_tree_clone("", recursive=True, dirfd=fd)
    try:
        sc.mount_setattr("", dirfd=clone, empty_path=True, recursive=True, set_=_RO)
        sc.move_mount_fd(clone, path)
    finally:
        os.close(clone)


def _ensure_dir(path: str) -> None:
    if not os.path.isdir(path):
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise OSError(exc.errno, f"mount point {path} does not exist and cannot be created"
                          f" on the read-only host ({exc.strerror})", path) from exc


__all__ = [
    "OPS", "PROC_MASKED", "PROC_READ_ONLY", "CompiledSteps", "SandboxStep", "compile_steps",
    "prepare_steps", "run_steps",
]
