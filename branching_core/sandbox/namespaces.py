"""The sandbox's namespaces and mounts: planned in the parent, applied in the child.

``SandboxPlan`` is computed in the caller (path checks, namespace fds of a workspace
helper, and the compiled filesystem ``steps``). ``enter_namespaces`` runs in the forked
keeper (before the pid-namespace init exists) and ``build_filesystem`` in that init (the
native executor, ``native.py``, does the same for commands from the same plan). Both
use only ``os`` and the ctypes syscalls: the parent may be multi-threaded, so the child
must not touch locks, logging or anything that could have been mid-update at fork time.

Filesystem inside a sandbox: everything inherited is read-only, nosuid, nodev (one
recursive ``mount_setattr``); the branch view is the only writable host path; ``/tmp``
is a private tmpfs; ``/dev`` is a tmpfs with null, zero, full, random, urandom, tty
and a private ``/dev/shm`` (so raw disks are unreachable even for uid 0); ``/proc`` is
the new pid namespace's, with its host-wide parts read-only or masked (see ``steps``);
without network ``/run`` is a private tmpfs too and every other host unix socket is
unreachable (``host_sockets``); branch stores and, unless exposed, homes and credential
files are covered (``masks``). The Python running forkdeck stays reachable (read-only)
even when it lives in a covered place: a branch's ``python -m pytest`` must find the
same interpreter and packages as the caller. All capabilities are dropped and
no_new_privs is set last.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import socket
import struct
import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from branching_core.errors import NamespaceError, WorkspaceError
from branching_core.gitops.shadow import borrowed_objects
from branching_core.sandbox import _syscalls as sc
from branching_core.sandbox.host_sockets import SocketPlan, plan_socket_hiding
from branching_core.sandbox.masks import (
    SecretMasks,
    dirs_to_keep,
    inside,
    keep_candidates,
    outermost,
    secret_masks,
    store_dirs,
)
from branching_core.sandbox.steps import SandboxStep, compile_steps, run_steps

# \A...\Z with DOTALL: a newline is a legal path byte (`$` and `.` would stop at it).
_VIEW_RE = re.compile(r"\A/proc/(\d+)/root(/.*)?\Z", re.DOTALL)
_SIOCSIFFLAGS = 0x8914
_IFF_UP_LOOPBACK_RUNNING = 0x1 | 0x8 | 0x40


def parse_view_path(path: str | os.PathLike[str]) -> tuple[int | None, str]:
    """Split ``/proc/<pid>/root/<inner>`` into ``(pid, "/<inner>")``; else ``(None, path)``.

    The overlay workspace backend hands out such paths: the view is mounted inside a
    helper process's private mount namespace and reached through its root.
    """
    text = os.fspath(path)
    match = _VIEW_RE.match(os.path.normpath(text))
    if match is None:
        return None, text
    return int(match.group(1)), match.group(2) or "/"


@dataclass
class SandboxPlan:
    """Everything the child needs, decided in the parent before forking."""

    view: str  # the branch view's path in the namespace the child will set up from
    target: str  # where the view appears inside the sandbox (and the cwd)
    network: bool
    new_userns: bool
    uid: int
    gid: int
    helper_pid: int | None = None
    userns_fd: int | None = None  # join the helper's user namespace first (if it differs)
    mntns_fd: int | None = None  # then its mount namespace
    keep_visible: tuple[str, ...] = ()  # host dirs in covered places re-exposed read-only
    hide_dirs: tuple[str, ...] = ()  # covered by an empty read-only tmpfs (stores, secrets)
    hide_files: tuple[str, ...] = ()  # covered by an empty read-only file (secrets)
    show_files: tuple[str, ...] = ()  # files inside hidden dirs shown again read-only
    sockets: SocketPlan | None = None  # None: host sockets stay reachable (network=True)
    private_run: bool = False  # /run becomes a private tmpfs (no network, /run a real dir)
    steps: tuple[SandboxStep, ...] = ()  # the init's filesystem work (``steps.compile_steps``)
    # (host path, writable, is a directory): shown at its own path despite the masks
    expose: tuple[tuple[str, bool, bool], ...] = ()
    pty: bool = False  # a private devpts in /dev: the sandbox may open pseudo-terminals
    netns_fd: int | None = None  # join this network namespace (``netstack``) instead of a new one
    network_mode: str = ""  # none | private | host | joined:<inode> (part of a pre-build key)

    @property
    def child_fds(self) -> list[int]:
        return [fd for fd in (self.userns_fd, self.mntns_fd, self.netns_fd) if fd is not None]

    def close_fds(self) -> None:
        for fd in self.child_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.userns_fd = self.mntns_fd = self.netns_fd = None


_COVERED = ("/tmp", "/run")


def plan_sandbox(
    workspace: str | os.PathLike[str], *, network: bool, mount_at: str | os.PathLike[str] | None,
    expose_secrets: bool = False,
    expose: Sequence[tuple[str | os.PathLike[str], bool]] = (),
    pty: bool = False,
) -> SandboxPlan:
    """Check the workspace, decide what to hide, open the view helper's namespace fds.

    ``expose``: ``(path, writable)`` pairs shown at their own path although a mask would
    hide them (an external agent's session directory in the masked home): each named
    path only, read-only unless ``writable``; paths that do not exist are skipped.
    """
    raw = os.fspath(workspace)
    helper, inner = parse_view_path(raw)
    if not os.path.isdir(raw):
        raise WorkspaceError(f"workspace {raw!r} is not an existing directory")
    euid = os.geteuid()
    plan = SandboxPlan(
        view=inner if helper is not None else os.path.realpath(raw),
        target="",
        network=network,
        new_userns=euid != 0,
        uid=euid,
        gid=os.getegid(),
        helper_pid=helper,
    )
    if plan.view == "/":
        raise WorkspaceError("refusing to sandbox with '/' as the writable branch directory")
    if mount_at is not None:
        target = os.path.normpath(os.path.join("/", os.fspath(mount_at)))
        if target == "/":
            raise WorkspaceError("mount_at must not be '/'")
        plan.target = target
    else:
        plan.target = plan.view
    _plan_masks(plan, expose_secrets)
    plan.expose = _checked_expose(expose, plan)
    plan.pty = pty
    # a branch's private git directory (a worktree or submodule workspace, issue 25)
    # borrows the real repository's objects: keep them readable where /tmp or /run
    # would cover them (read-only, like every other kept directory)
    borrowed = [d for d in borrowed_objects(raw) if inside(d, _COVERED)]
    if borrowed:
        plan.keep_visible = outermost([*plan.keep_visible, *borrowed])
    if helper is not None:
        try:
            mine = os.stat("/proc/self/ns/user").st_ino
            theirs = os.stat(f"/proc/{helper}/ns/user").st_ino
            if mine != theirs:
                plan.userns_fd = os.open(f"/proc/{helper}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
                plan.new_userns = False  # the helper's user namespace already gives us caps
            plan.mntns_fd = os.open(f"/proc/{helper}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            plan.close_fds()
            raise NamespaceError(
                f"cannot open the namespaces of view helper {helper}: {exc.strerror}"
            ) from exc
    plan.steps = compile_steps(plan)
    return plan


_BATCH = threading.local()
_Masks = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...], bool,
               SocketPlan | None]


@contextlib.contextmanager
def shared_mask_plan() -> Generator[None, None, None]:
    """Sandboxes planned by this thread inside the block share one mask plan per
    (hidden stores, secrets, network, view helper).

    Sibling candidates started together see the same host: walking its mounts,
    sockets and homes once for the batch instead of once per sandbox saves about
    6 ms of the caller's time per candidate. The plan lives only for the block (a
    few milliseconds), so a socket or secret that appears later is still planned
    for by the next sandbox.
    """
    outer = getattr(_BATCH, "memo", None)
    if outer is None:
        _BATCH.memo = {}
    try:
        yield
    finally:
        if outer is None:
            _BATCH.memo = None


def _plan_masks(plan: SandboxPlan, expose_secrets: bool) -> None:
    """Stores always, secrets unless exposed; what the caller needs stays visible."""
    stores = store_dirs(plan.view, plan.target)
    memo: dict[tuple[object, ...], _Masks] | None = getattr(_BATCH, "memo", None)
    key = (tuple(stores), expose_secrets, plan.network, plan.helper_pid)
    if memo is not None and key in memo:
        (plan.hide_dirs, plan.hide_files, plan.keep_visible, plan.show_files,
         plan.private_run, plan.sockets) = memo[key]
        return
    _plan_masks_now(plan, expose_secrets, stores)
    if memo is not None:
        memo[key] = (plan.hide_dirs, plan.hide_files, plan.keep_visible, plan.show_files,
                     plan.private_run, plan.sockets)


def _plan_masks_now(plan: SandboxPlan, expose_secrets: bool, stores: list[str]) -> None:
    secrets = SecretMasks((), ()) if expose_secrets else secret_masks()
    (plan.hide_dirs, plan.hide_files, plan.keep_visible,
     plan.show_files) = _mask_decisions(tuple(stores), secrets, keep_candidates())
    if not plan.network:
        plan.private_run = os.path.isdir("/run") and not os.path.islink("/run")
        replaced = ("/tmp", "/dev", "/proc", *(("/run",) if plan.private_run else ()))
        plan.sockets = plan_socket_hiding((*replaced, *plan.hide_dirs), plan.helper_pid)


@functools.lru_cache(maxsize=16)
def _mask_decisions(stores: tuple[str, ...], secrets: SecretMasks, candidates: tuple[str, ...],
                    ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Hidden dirs and files, kept dirs and shown files: a pure function of the stores,
    the secrets (``secret_masks`` proves them unchanged) and the directories the caller
    may need, so computed once for each (about 0.15 ms of every sandbox start)."""
    hide_dirs = outermost(stores, real=secrets.dirs)
    hide_files = tuple(f for f in secrets.files if not inside(f, hide_dirs))
    kept = dirs_to_keep((*_COVERED, *secrets.dirs), secrets)  # (from ``candidates``)
    keep_visible = tuple(k for k in kept if not inside(k, stores))
    show_files = tuple(f for f in secrets.shown_files if not inside(f, stores))
    return hide_dirs, hide_files, keep_visible, show_files


def _checked_expose(expose: Sequence[tuple[str | os.PathLike[str], bool]],
                    plan: SandboxPlan) -> tuple[tuple[str, bool, bool], ...]:
    """Absolute, real, existing paths; never ``/``, the branch view or a branch store
    (a store holds sibling branches' work: exposing it would undo their isolation)."""
    if not expose:
        return ()
    out: dict[str, bool] = {}
    stores = store_dirs(plan.view, plan.target)
    for raw, writable in expose:
        text = os.fspath(raw)
        if not os.path.isabs(text):
            raise WorkspaceError(f"exposed path {text!r} is not absolute")
        path = os.path.realpath(text)
        if path == "/" or inside(plan.view, (path,)) or inside(plan.target, (path,)):
            raise WorkspaceError(f"refusing to expose {text!r}: it holds the branch view")
        if inside(path, stores) or any(inside(s, (path,)) for s in stores):
            raise WorkspaceError(f"refusing to expose {text!r}: it holds branch stores")
        if not os.path.lexists(path):
            continue
        out[path] = out.get(path, False) or bool(writable)
    return tuple((path, writable, os.path.isdir(path)) for path, writable in sorted(out.items()))


def namespace_flags(plan: SandboxPlan) -> int:
    """The ``unshare`` flags of a sandbox (both executors use these)."""
    flags = sc.CLONE_NEWNS | sc.CLONE_NEWPID | sc.CLONE_NEWIPC | sc.CLONE_NEWUTS
    if not plan.network and plan.netns_fd is None:
        flags |= sc.CLONE_NEWNET
    if plan.new_userns:
        flags |= sc.CLONE_NEWUSER
    return flags


def enter_namespaces(plan: SandboxPlan, *, init: bool = False) -> None:
    """In the keeper: join the view helper's namespaces, then unshare fresh ones.

    Children forked afterwards are in the new pid namespace (the first becomes its
    init); the keeper itself stays outside it, so it can report the init's fate.
    ``init``: called by an init that was born in its new pid namespace (the one-fork
    shape, ``_forker``), which makes every namespace but that one.
    """
    if plan.userns_fd is not None:
        sc.setns(plan.userns_fd, sc.CLONE_NEWUSER)
    if plan.mntns_fd is not None:
        sc.setns(plan.mntns_fd, sc.CLONE_NEWNS)
    if plan.netns_fd is not None:
        sc.setns(plan.netns_fd, sc.CLONE_NEWNET)
    sc.unshare(namespace_flags(plan) & ~(sc.CLONE_NEWPID if init else 0))
    if plan.new_userns:
        _write_file("/proc/self/setgroups", b"deny")
        _write_file("/proc/self/uid_map", f"{plan.uid} {plan.uid} 1".encode())
        _write_file("/proc/self/gid_map", f"{plan.gid} {plan.gid} 1".encode())


def _write_file(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def build_filesystem(plan: SandboxPlan) -> None:
    """In the pid-namespace init: perform the plan's compiled steps (``steps``)."""
    run_steps(plan.steps)


def loopback_up() -> None:
    """Bring up ``lo`` in this thread's network namespace (a new one has it down)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifreq = struct.pack("16sH14x", b"lo", _IFF_UP_LOOPBACK_RUNNING)
        fcntl.ioctl(sock, _SIOCSIFFLAGS, ifreq)
    finally:
        sock.close()


def finish_isolation(plan: SandboxPlan) -> None:
    """Last steps in the init: hostname, loopback, then drop every capability."""
    sc.sethostname(b"forkdeck")
    if not plan.network and plan.netns_fd is None:
        loopback_up()
    sc.drop_all_capabilities()


__all__ = [
    "SandboxPlan",
    "build_filesystem",
    "enter_namespaces",
    "finish_isolation",
    "loopback_up",
    "namespace_flags",
    "parse_view_path",
    "plan_sandbox",
]
