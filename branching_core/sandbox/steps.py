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
from dataclasses import dataclass
from typing import TYPE_CHECKING

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


def compile_steps(plan: SandboxPlan) -> tuple[SandboxStep, ...]:
    """The init's filesystem work for ``plan``: a read-only world with one writable view.

    Everything inherited is read-only, nosuid, nodev; the branch view is the only
    writable host path; ``/tmp`` is a private tmpfs; ``/dev`` a tmpfs with a few device
    nodes and a private ``/dev/shm``; ``/proc`` the new pid namespace's with host-wide
    parts read-only or masked; without network ``/run`` is private and host sockets are
    covered; stores and secrets are hidden; kept and shown paths come back read-only.
    A pure function of the plan's decisions (nothing is looked up here), so sandboxes
    with the same decisions share one compiled list (the same object: ``native``
    caches its encoding by identity).
    """
    # Without a user namespace of our own (a root caller) one overlay per *mount* serves
    # every directory on it (a bind from that stage costs far less than an overlay);
    # in a user namespace a mount with locked children cannot be a layer.
    share = plan.sockets is not None and not plan.new_userns and plan.userns_fd is None
    return _compile(plan.view, plan.target, plan.keep_visible, plan.hide_dirs,
                    plan.hide_files, plan.show_files, plan.sockets, plan.private_run, share,
                    plan.expose, plan.pty)


@functools.lru_cache(maxsize=32)
def _compile(view_path: str, target: str, keep_visible: tuple[str, ...],
             hide_dirs: tuple[str, ...], hide_files: tuple[str, ...],
             show_files: tuple[str, ...], sockets: SocketPlan | None, private_run: bool,
             share: bool, expose: tuple[tuple[str, bool, bool], ...] = (),
             pty: bool = False) -> tuple[SandboxStep, ...]:
    c = _Compiler()
    c.add("private")
    # Grab the view (and kept dirs, shown files, the mounts stages are made from) before
    # anything covers them: they may live under /tmp or /run.
    view = c.slot()
    c.add("clone", view, view_path, 1)
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
            stage = stages[mount] = f"/dev/.forkdeck-stage{len(stages)}"
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
    inner = (target, *keep_visible, *show_files, *(entry[0] for entry in expose))
    late: list[int] = []
    flags = sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC
    for path in hide_dirs:
        needed = any(inside(p, (path,)) for p in inner)
        c.add("mount", "tmpfs", path, "tmpfs", flags | (0 if needed else sc.MS_RDONLY),
              "size=64k,mode=755", when="dir", when_path=path)
        if needed:  # an fd of the tmpfs just made: only a hide that happened is finished
            late.append(c.slot())
            c.add("opath", late[-1], path, when="dir", when_path=path)
    c.mask_files(hide_files, 0o000)  # reading a secret fails (EACCES)
    _compile_proc(c)
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
    for stage in stages.values():  # the binds keep what they show
        c.add("umount", stage, sc.MNT_DETACH)
        c.add("rmdir", stage)
    if sockets is not None:
        c.add("rmdir", EMPTY_DIR)  # the overlays keep their reference to it
    c.add("ensure_dir", target)
    c.add("setattr_fd", view, sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV, 0, 1)
    c.add("move", view, target)
    for slot in late:  # read-only only now: the view's mount point was made in it
        c.add("setattr_fd", slot, _RO, 0, 0, need=slot)
    for slot in range(c.slots):
        c.add("close", slot)
    c.add("chdir", target)
    return tuple(c.steps)


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
    if when == "dir":
        return os.path.isdir(path) and not os.path.islink(path)
    if when == "exists":
        return os.path.exists(path)
    if when == "file":
        return os.path.lexists(path) and not os.path.isdir(path)
    if when == "missing":
        return not os.path.exists(path)
    return True


def run_steps(steps: tuple[SandboxStep, ...]) -> None:
    """Perform ``steps`` in this process (the sandbox's Python init).

    Raises ``OSError`` (with the path) on the first step that fails.
    """
    slots: dict[int, int] = {}
    try:
        for step in steps:
            if step.need >= 0 and slots.get(step.need, -1) < 0:
                continue
            if not _holds(step.when, step.when_path):
                continue
            try:
                _run_one(step, slots)
            except FileNotFoundError:
                if not step.missing_ok:
                    raise
                if step.op in ("clone", "opath"):
                    slots[int(step.args[0])] = -1
    finally:
        for fd in slots.values():
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass


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


def _run_one(step: SandboxStep, slots: dict[int, int]) -> None:
    op, a = step.op, step.args
    if op == "private":
        sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    elif op == "clone":
        slots[int(a[0])] = sc.open_tree_clone(str(a[1]), recursive=bool(a[2]))
    elif op == "opath":
        slots[int(a[0])] = os.open(str(a[1]), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    elif op == "setattr":
        sc.mount_setattr(str(a[0]), set_=int(a[1]), clear=int(a[2]), recursive=bool(a[3]))
    elif op == "setattr_fd":
        sc.mount_setattr("", dirfd=slots[int(a[0])], empty_path=True, set_=int(a[1]),
                         clear=int(a[2]), recursive=bool(a[3]))
    elif op == "mount":
        sc.mount(str(a[0]) or None, str(a[1]), str(a[2]) or None, int(a[3]), str(a[4]) or None)
    elif op == "overlay":
        _overlay(str(a[0]), slots[int(a[1])] if int(a[1]) >= 0 else -1, str(a[2]))
    elif op == "kept":
        _show_kept(str(a[0]), slots[int(a[1])], str(a[2]), str(a[3]))
    elif op == "move":
        sc.move_mount_fd(slots[int(a[0])], str(a[1]))
    elif op == "mkdir":
        os.mkdir(str(a[0]), int(a[1]))
    elif op == "ensure_dir":
        _ensure_dir(str(a[0]))
    elif op == "rmdir":
        os.rmdir(str(a[0]))
    elif op == "touch":
        fd = os.open(str(a[0]), os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC
                     | (os.O_EXCL if int(a[2]) else 0), int(a[1]))
        try:
            os.fchmod(fd, int(a[1]))  # whatever the umask
        finally:
            os.close(fd)
    elif op == "symlink":
        os.symlink(str(a[0]), str(a[1]))
    elif op == "unlink":
        os.unlink(str(a[0]))
    elif op == "umount":
        sc.umount2(str(a[0]), int(a[1]))
    elif op == "close":
        fd = slots.pop(int(a[0]), -1)
        if fd >= 0:
            os.close(fd)
    elif op == "chdir":
        os.chdir(str(a[0]))
    else:
        raise SystemCallError(errno.EINVAL, f"unknown sandbox step {op!r}")


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


__all__ = ["OPS", "PROC_MASKED", "PROC_READ_ONLY", "SandboxStep", "compile_steps", "run_steps"]
