"""A network namespace that outlives single commands: held by a small process of its own.

Why a holder process: a branch's service (a dev server, a database) and the branch's
later commands must share one network namespace, so the namespace cannot belong to any
one sandbox. ``NetNamespace`` forks a holder that makes the namespace (and, for a normal
user, the user namespace owning it), brings ``lo`` up, and then only waits. Sandboxes
join it with ``setns`` (``SandboxPlan.netns_fd``); the host-forward relay gets sockets
made inside it from the holder over a unix socket (``SCM_RIGHTS``), so the relay works
for a normal user too (a multi-threaded process cannot enter another user namespace).

Outbound access (``outbound=True``, the ``private`` mode) comes from a user-mode network
stack, the one rootless containers use: pasta (Debian package ``passt``) or
slirp4netns. The holder starts it, before unsharing, from a child that stays in the
host's namespaces and has ``PR_SET_PDEATHSIG`` towards the single-threaded holder.

Lifetime: the holder's control socket is its lifeline. When the owner closes it, or
dies (even by SIGKILL), the holder exits and the stack follows it (PDEATHSIG); the
namespace itself ends with the last process in it (the branch's sandboxes have their
own lifelines to the same owner). Nothing survives the owner.

Between fork and ``exec``/``_exit`` only ``os``, ``socket`` and the ctypes syscalls run:
the owner may be multi-threaded.
"""

from __future__ import annotations

import array
import contextlib
import os
import shutil
import signal
import socket
import struct
import threading
import time
from dataclasses import dataclass

from branching_core.errors import InvalidArgumentError, NamespaceError
from branching_core.sandbox import _syscalls as sc
from branching_core.sandbox.namespaces import loopback_up

STACKS = ("pasta", "slirp4netns")
PACKAGES = {"pasta": "passt", "slirp4netns": "slirp4netns"}
READY_TIMEOUT = 10.0
_SLIRP_GATEWAY_HOST = "10.0.2.2"  # slirp4netns's address of the host's loopback


class NetworkUnavailable(NamespaceError):
    """The ``private`` network cannot be set up here (the message says why and what to do)."""


@dataclass(frozen=True)
class Stack:
    """A user-mode network stack found on this machine."""

    name: str  # "pasta" or "slirp4netns"
    path: str


def tun_problem() -> str | None:
    """Why ``/dev/net/tun`` is unusable for this (normal) user, or None when it is fine.

    Both stacks open it inside the namespace; some hosts ship it mode 0600 (root only).
    """
    if os.geteuid() == 0:
        return None
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun does not exist (load the tun module: modprobe tun)"
    if not os.access("/dev/net/tun", os.R_OK | os.W_OK):
        mode = oct(os.stat("/dev/net/tun").st_mode & 0o777)
        return (f"/dev/net/tun is mode {mode[2:]}: a normal user cannot open it, so no "
                "user-mode network stack can run (as root: chmod 0666 /dev/net/tun)")
    return None


def find_stack(preference: str = "auto") -> Stack:
    """The stack to use: ``pasta``, ``slirp4netns`` or the first found (``auto``).

    Raises ``NetworkUnavailable`` with one line naming the Debian package to install.
    """
    if preference not in ("auto", *STACKS):
        raise InvalidArgumentError(
            f"unknown network stack {preference!r} (auto, pasta, slirp4netns)"
        )
    wanted = STACKS if preference == "auto" else (preference,)
    for name in wanted:
        path = shutil.which(name)
        if path:
            problem = tun_problem()
            if problem is not None:
                raise NetworkUnavailable(f"private network unavailable: {problem}")
            return Stack(name, path)
    if preference == "auto":
        raise NetworkUnavailable(
            "private network needs a user-mode network stack: install pasta (apt install "
            "passt) or slirp4netns (apt install slirp4netns), or use --network none|host")
    raise NetworkUnavailable(
        f"private network stack {preference!r} not found: install it (apt install "
        f"{PACKAGES[preference]}) or choose another ([sandbox] network_stack)")


def _stack_argv(stack: Stack, holder_pid: int, own_userns: bool) -> list[str]:
    """The stack's command line for the holder's namespace (no port published)."""
    if stack.name == "pasta":
        argv = [stack.path, "--config-net", "-f", "-q", "-t", "none", "-u", "none",
                "-T", "none", "-U", "none"]
        if own_userns:
            return [*argv, str(holder_pid)]  # joins the holder's user namespace too
        # root: the namespace path (the pid form would try to enter our own user
        # namespace); the holder dropped its capabilities so pasta may open it
        return [*argv, "--runas", "0", "--netns", f"/proc/{holder_pid}/ns/net"]
    argv = [stack.path, "--configure", "--mtu=65520"]
    if own_userns:
        argv.append(f"--userns-path=/proc/{holder_pid}/ns/user")
    return [*argv, str(holder_pid), "tap0"]


def _send_fds(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def _recv_fds(sock: socket.socket, size: int = 4096) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    msg, anc, _flags, _addr = sock.recvmsg(size, socket.CMSG_SPACE(4 * 4))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - (len(data) % fds.itemsize)])
    return msg, list(fds)


def _default_gateway() -> str | None:
    """The default route's gateway in this thread's network namespace (IPv4)."""
    try:
        with open("/proc/thread-self/net/route", "rb") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        cols = line.split()
        if len(cols) > 2 and cols[1] == b"00000000":
            return socket.inet_ntoa(struct.pack("<I", int(cols[2], 16)))
    return None


def _holder(ctl: socket.socket, stack: Stack | None, userns_fd: int | None,
            new_userns: bool, uid: int, gid: int) -> None:
    """Body of the holder process (see the module docstring); exits via ``os._exit``."""
    go_r = go_w = err_r = err_w = -1
    launcher = 0
    try:
        os.setsid()
        sc.prctl(sc.PR_SET_DUMPABLE, 1)
        # Another sandbox's lifeline or another holder's control socket, held here,
        # would keep that one alive after its owner let go: keep only our own fds.
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):
            os.dup2(null, std)
        keep_set: set[int] = {0, 1, 2, ctl.fileno()}
        if userns_fd is not None:
            keep_set.add(userns_fd)
        keep = sorted(keep_set)
        prev = 3
        for fd in keep:
            if fd >= prev:
                os.closerange(prev, fd)
                prev = fd + 1
        os.closerange(prev, 1 << 20)
        if stack is not None:
            go_r, go_w = os.pipe()
            err_r, err_w = os.pipe2(os.O_CLOEXEC)
            launcher = os.fork()
            if launcher == 0:  # stays in the host's namespaces; becomes the stack
                try:
                    os.close(go_w)
                    sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
                    if os.read(go_r, 1) != b"g":
                        os._exit(1)
                    holder = os.getppid()
                    argv = _stack_argv(stack, holder, new_userns or userns_fd is not None)
                    null = os.open(os.devnull, os.O_RDWR)
                    os.dup2(null, 0)
                    os.dup2(null, 1)
                    os.dup2(err_w, 2)
                    os.closerange(3, 1 << 16)
                    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these;
                        signal.signal(sig, signal.SIG_DFL)  # pasta refuses to start then
                    os.execv(argv[0], argv)
                finally:
                    os._exit(127)
            os.close(go_r)
            os.close(err_w)
        if userns_fd is not None:
            sc.setns(userns_fd, sc.CLONE_NEWUSER)
            os.close(userns_fd)
        elif new_userns:
            sc.unshare(sc.CLONE_NEWUSER)
            for path, data in (("/proc/self/setgroups", b"deny"),
                               ("/proc/self/uid_map", f"{uid} {uid} 1".encode()),
                               ("/proc/self/gid_map", f"{gid} {gid} 1".encode())):
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
        sc.unshare(sc.CLONE_NEWNET)
        loopback_up()
        if not new_userns and userns_fd is None:
            sc.drop_all_capabilities()  # else pasta (fewer caps than us) may not open our ns
        gateway = "127.0.0.1"
        if stack is not None:
            os.write(go_w, b"g")
            os.close(go_w)
            deadline = time.monotonic() + READY_TIMEOUT
            while True:
                found = _default_gateway()
                if found is not None:
                    gateway = _SLIRP_GATEWAY_HOST if stack.name == "slirp4netns" else found
                    break
                pid, _status = os.waitpid(launcher, os.WNOHANG)
                if pid or time.monotonic() > deadline:
                    os.set_blocking(err_r, False)
                    try:
                        why = os.read(err_r, 2000).decode("utf-8", "replace").strip()
                    except OSError:
                        why = ""
                    why = why.splitlines()[-1] if why else (
                        "it exited" if pid else f"no route within {READY_TIMEOUT:.0f} s")
                    ctl.sendall(f"E{stack.name} failed: {why}".encode())
                    os._exit(1)
                time.sleep(0.002)
        ctl.sendall(f"R{gateway}".encode())
        while True:
            try:
                req = ctl.recv(16)
            except InterruptedError:
                continue
            if not req:
                break
            family = socket.AF_INET6 if req[:1] == b"6" else socket.AF_INET
            s = socket.socket(family, socket.SOCK_STREAM)
            try:
                _send_fds(ctl, b"s", [s.fileno()])
            finally:
                s.close()
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            ctl.sendall(f"Ecannot make the network namespace: {exc}".encode())
    finally:
        if launcher:
            with contextlib.suppress(OSError):
                os.kill(launcher, signal.SIGKILL)
                os.waitpid(launcher, 0)  # gone, not a zombie, before the holder is
        os._exit(0)


class NetNamespace:
    """A network namespace held by a process of its own (see the module docstring).

    ``outbound``: attach a user-mode stack (``stack``: ``auto``/``pasta``/``slirp4netns``)
    for connections to the outside; without it the namespace has only loopback.
    ``userns_pid``: make it inside that process's user namespace (a workspace view
    helper's, for a normal user), so a sandbox can join both.
    """

    def __init__(self, *, outbound: bool = True, stack: str = "auto",
                 userns_pid: int | None = None) -> None:
        self.outbound = outbound
        self.stack = find_stack(stack) if outbound else None
        self.closed = False
        self._lock = threading.Lock()
        euid = os.geteuid()
        userns_fd = None
        if userns_pid is not None and os.stat(f"/proc/{userns_pid}/ns/user").st_ino != \
                os.stat("/proc/self/ns/user").st_ino:
            userns_fd = os.open(f"/proc/{userns_pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        self.own_userns = euid != 0 or userns_fd is not None
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = os.fork()
        except OSError as exc:
            mine.close()
            theirs.close()
            raise NamespaceError(f"cannot start the network namespace holder: {exc}") from exc
        if pid == 0:  # pragma: no cover - runs in the holder
            try:
                mine.close()
                _holder(theirs, self.stack, userns_fd, euid != 0 and userns_fd is None,
                        euid, os.getegid())
            finally:
                os._exit(127)
        theirs.close()
        if userns_fd is not None:
            os.close(userns_fd)
        self.owner = os.getpid()  # a fork of the owner never ends the holder (``close``)
        self.pid = pid
        self._ctl = mine
        try:
            self._pidfd = os.pidfd_open(pid)
        except OSError:
            self._pidfd = -1
        mine.settimeout(READY_TIMEOUT + 5)
        try:
            reply = mine.recv(4096)
        except OSError as exc:
            reply = f"Eno answer from the holder: {exc}".encode()
        if not reply.startswith(b"R"):
            self.close()
            why = reply[1:].decode("utf-8", "replace") if reply else "the holder died"
            raise NetworkUnavailable(f"private network failed: {why}")
        mine.settimeout(None)
        self.gateway = reply[1:].decode()
        """Where the host's loopback is reached from inside (``127.0.0.1``: nowhere)."""

    @property
    def stack_name(self) -> str:
        return self.stack.name if self.stack is not None else "loopback"

    def open_fd(self) -> int:
        """A new fd of the namespace (the caller closes it); raises when it is gone."""
        if self.closed:
            raise NamespaceError("the branch's network namespace was closed")
        try:
            return os.open(f"/proc/{self.pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise NamespaceError(f"the branch's network namespace is gone: {exc}") from exc

    def open_userns_fd(self) -> int | None:
        """An fd of the user namespace owning it, when that is not ours (normal users)."""
        if not self.own_userns:
            return None
        try:
            return os.open(f"/proc/{self.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise NamespaceError(f"the branch's user namespace is gone: {exc}") from exc

    def inode(self) -> int | None:
        try:
            return os.stat(f"/proc/{self.pid}/ns/net").st_ino
        except OSError:
            return None

    def socket(self, family: socket.AddressFamily = socket.AF_INET) -> socket.socket:
        """A TCP socket made inside the namespace (connect it to reach a branch's port)."""
        with self._lock:
            if self.closed:
                raise NamespaceError("the branch's network namespace was closed")
            self._ctl.send(b"6" if family == socket.AF_INET6 else b"4")
            msg, fds = _recv_fds(self._ctl)
        if msg != b"s" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise NamespaceError("the network namespace holder did not answer")
        return socket.socket(fileno=fds[0])

    def close(self) -> None:
        """End the holder (and the stack); idempotent. The namespace ends with the last
        process in it."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._ctl.close()
        if os.getpid() != self.owner:  # a forked copy: the owner's holder is not ours
            if self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1
            return
        if self._pidfd >= 0:
            from select import POLLIN, poll
            p = poll()
            p.register(self._pidfd, POLLIN)
            if not p.poll(2000):
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            os.close(self._pidfd)
            self._pidfd = -1
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def __enter__(self) -> NetNamespace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            with contextlib.suppress(Exception):
                self.close()


__all__ = ["PACKAGES", "NetNamespace", "NetworkUnavailable", "Stack", "find_stack",
           "tun_problem"]
