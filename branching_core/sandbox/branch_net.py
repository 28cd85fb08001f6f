"""A branch's network: its namespace, its services and its host forwards, as one object.

``BranchNetwork`` is the engine API of "every branch its own localhost". Made for a
branch (``for_branch`` ties it to the workspace ``Branch``: commit, abort, merge and exit
close it), it holds one network namespace (``netstack.NetNamespace``) that every command
of the branch joins (``run``, or ``network=bn.network`` for any sandbox), starts the
branch's declared services on demand (``start_service``), and opens host forwards to
the branch's ports (``forward``). ``close`` stops the services (their stop signal, then
the kill), closes the forwards and ends the namespace: nothing of the branch is left.

Every live one is listed in this process (``live_networks``) and, for ``forkdeck
ports`` in another process, in a small record per process under the user's runtime
directory (``ports_records``); a record whose process is gone is ignored and removed.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import socket
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core.atomicio import atomic_write
from branching_core.errors import BranchingError
from branching_core.sandbox.command import CommandResult, run_command
from branching_core.sandbox.forwards import Forward, open_forward
from branching_core.sandbox.limits import ResourceLimits
from branching_core.sandbox.namespaces import parse_view_path
from branching_core.sandbox.netstack import NetNamespace, NetworkUnavailable
from branching_core.sandbox.network import (
    NetworkArg,
    NetworkMode,
    NetworkPolicy,
    parse_mode,
    private_namespace,
)
from branching_core.sandbox.network import policy as current_policy
from branching_core.sandbox.services import Service, ServiceError, ServiceSpec

if TYPE_CHECKING:
    from branching_core.workspace.branch import Branch

log = logging.getLogger(__name__)
_LIVE: list[BranchNetwork] = []
_LISTENERS: list[Callable[[Forward], None]] = []


def add_forward_listener(callback: Callable[[Forward], None]) -> Callable[[], None]:
    """Call ``callback(forward)`` (from the thread that opened it) for every forward this
    process opens (a UI shows ``b · web → http://...`` at once); returns the remover."""
    _LISTENERS.append(callback)

    def remove() -> None:
        with contextlib.suppress(ValueError):
            _LISTENERS.remove(callback)

    return remove

_live_lock = threading.Lock()


def _forget_in_child() -> None:
    """A fork does not own its parent's branch networks (nor may it write their record)."""
    global _live_lock
    _LIVE.clear()
    _live_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def _close_all_at_exit() -> None:
    """forkdeck exits: every branch network still open stops its services gracefully (a
    database flushes) and removes its record (a SIGKILL leaves nothing running either:
    see the module docstring; only a stale record, which readers drop)."""
    for net in live_networks():
        with contextlib.suppress(Exception):
            net.close()


class BranchNetwork:
    """One branch's network namespace, services and forwards (see the module docstring).

    ``mode``: ``private`` (own namespace with outbound access), ``none`` (own namespace,
    loopback only) or ``host`` (the host's network: services bind the host's ports, and a
    forward is the port itself). ``services``: the declared ones, by name.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        label: str,
        mode: NetworkMode | str = "private",
        services: Mapping[str, ServiceSpec] | Sequence[ServiceSpec] = (),
        mount_at: str | os.PathLike[str] | None = None,
        limits: ResourceLimits | None = None,
        policy: NetworkPolicy | None = None,
        workspace_root: str | os.PathLike[str] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.label = label
        self.mode: NetworkMode = parse_mode(mode)
        specs = services.values() if isinstance(services, Mapping) else services
        self.specs: dict[str, ServiceSpec] = {s.name: s for s in specs}
        self.mount_at = mount_at
        self.limits = limits
        self.workspace_root = os.fspath(workspace_root or mount_at or path)
        self.services: dict[str, Service] = {}
        self.forwards: dict[int, Forward] = {}
        self.closed = False
        self._lock = threading.RLock()
        helper = parse_view_path(self.path)[0]
        self.namespace: NetNamespace | None = None
        if self.mode == "private":
            try:
                self.namespace = private_namespace(helper, policy)
            except NetworkUnavailable as exc:
                if (policy or current_policy()).fallback != "host":
                    raise
                log.warning("%s; branch %s uses the host's network ([sandbox] "
                            "network_fallback = \"host\")", exc, label)
                self.mode = "host"
        elif self.mode == "none":
            self.namespace = NetNamespace(outbound=False, userns_pid=helper)
        with _live_lock:
            _LIVE.append(self)
        try:
            for spec in self.specs.values():
                if spec.autostart:
                    self.start_service(spec.name)
        except BaseException:
            self.close()
            raise

    # -- running things in the branch ----------------------------------------------------
    @property
    def network(self) -> NetworkArg:
        """What to pass as ``network=`` to a sandbox so it joins this branch's network."""
        return self.namespace if self.namespace is not None else True

    @property
    def gateway(self) -> str | None:
        """The address of the host's loopback inside the branch (``private`` only)."""
        ns = self.namespace
        return ns.gateway if ns is not None and ns.outbound else None

    def run(self, command: str | Sequence[str], **kwargs: Any) -> CommandResult:
        """``run_command`` in the branch's view and network (its services at localhost)."""
        self._check_open()
        kwargs.setdefault("mount_at", self.mount_at)
        kwargs.setdefault("limits", self.limits)
        return run_command(command, self.path, network=self.network, **kwargs)

    def _check_open(self) -> None:
        if self.closed:
            raise BranchingError(f"the network of branch {self.label} is closed")

    # -- services --------------------------------------------------------------------------
    def start_service(self, name: str, *, wait: bool = True,
                      spec: ServiceSpec | None = None) -> Service:
        """Start ``name`` (declared, or ``spec``) unless it runs; wait until ready.

        Raises ``ServiceError`` naming the declared services for an unknown name.
        """
        with self._lock:
            self._check_open()
            running = self.services.get(name)
            if running is not None and running.alive:
                if wait and not running.ready:
                    running.wait_ready()
                return running
            if spec is not None:
                self.specs[name] = spec
            spec = self.specs.get(name)
            if spec is None:
                known = ", ".join(sorted(self.specs)) or "none declared"
                raise ServiceError(f"unknown service {name!r} (services: {known})")
            ns = self.namespace
            service = Service(spec, self.path, network=self.network,
                              make_socket=ns.socket if ns is not None else _host_socket,
                              mount_at=self.mount_at, limits=self.limits)
            self.services[name] = service
        if wait:
            service.wait_ready()
            if spec.port is not None:
                self.forward(spec.port, service=name)
        return service

    def stop_service(self, name: str) -> None:
        """Stop ``name`` (its stop signal, then the kill) and close its forward."""
        with self._lock:
            service = self.services.pop(name, None)
        if service is not None:
            service.stop()
            port = service.spec.port
            if port is not None:
                fwd = self.forwards.pop(port, None)
                if fwd is not None:
                    fwd.close()
        _write_record()

    # -- forwards --------------------------------------------------------------------------
    def forward(self, port: int, *, service: str | None = None, host_port: int = 0) -> Forward:
        """A host port on 127.0.0.1 relayed to ``port`` inside the branch (one per port)."""
        with self._lock:
            self._check_open()
            existing = self.forwards.get(port)
            if existing is not None and not existing.closed:
                return existing
            ns = self.namespace
            if ns is None:  # host network: the branch's port is the host's port
                fwd = Forward(branch=self.label, port=port, host_port=port, service=service)
            else:
                fwd = open_forward(ns.socket, port, branch=self.label, service=service,
                                   host_port=host_port)
            self.forwards[port] = fwd
        _write_record()
        for listener in list(_LISTENERS):
            try:
                listener(fwd)
            except Exception as exc:  # a broken listener must not break the forward
                log.warning("forward listener failed: %s", exc)
        return fwd

    def describe(self) -> list[dict[str, Any]]:
        """One record per forward: branch, service, port, host_port, url, status."""
        out: list[dict[str, Any]] = []
        with self._lock:
            for fwd in self.forwards.values():
                svc = self.services.get(fwd.service) if fwd.service else None
                out.append({"branch": self.label, "service": fwd.service, "port": fwd.port,
                            "host_port": fwd.host_port, "url": fwd.url,
                            "status": svc.status if svc is not None else "forward",
                            "mode": self.mode, "workspace": self.workspace_root})
        return out

    # -- the end ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every service, close every forward, end the namespace (idempotent)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            services = list(self.services.values())
            self.services.clear()
            forwards = list(self.forwards.values())
            self.forwards.clear()
        for service in services:
            with contextlib.suppress(Exception):
                service.stop()
        for fwd in forwards:
            with contextlib.suppress(Exception):
                fwd.close()
        if self.namespace is not None:
            self.namespace.close()
        with _live_lock:
            if self in _LIVE:
                _LIVE.remove(self)
        _write_record()

    def __enter__(self) -> BranchNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def for_branch(cls, branch: Branch, **kwargs: Any) -> BranchNetwork:
        """A network for workspace ``branch`` that closes when the branch does (commit,
        abort, merge, exit). ``mount_at`` defaults to the workspace's own path."""
        kwargs.setdefault("label", getattr(branch, "name", None) or str(branch.path))
        root = getattr(getattr(branch, "workspace", None), "path", None)
        if root is not None:
            kwargs.setdefault("mount_at", str(root))
            kwargs.setdefault("workspace_root", str(root))
        net = cls(branch.path, **kwargs)
        hook = getattr(branch, "add_close_hook", None)
        if hook is not None:
            hook(net.close)
        return net


def _host_socket(family: socket.AddressFamily = socket.AF_INET) -> socket.socket:
    return socket.socket(family, socket.SOCK_STREAM)


def live_networks() -> list[BranchNetwork]:
    """Every open ``BranchNetwork`` of this process."""
    with _live_lock:
        return list(_LIVE)


def forwards_of_process() -> list[dict[str, Any]]:
    """Every forward of this process (``describe`` of each live branch network)."""
    return [rec for net in live_networks() for rec in net.describe()]


# -- records for other processes (``forkdeck ports``) -----------------------------------------
def records_dir() -> Path:
    """``$XDG_RUNTIME_DIR/forkdeck/ports`` or ``/tmp/forkdeck-<uid>/ports``."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    root = Path(base) / "forkdeck" if base else Path(tempfile.gettempdir()) / \
        f"forkdeck-{os.getuid()}"
    return root / "ports"


def _write_record() -> None:
    """This process's forwards, for other processes; removed when there are none."""
    recs = forwards_of_process()
    target = records_dir() / f"{os.getpid()}.json"
    try:
        if not recs:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            return
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(target, json.dumps({"pid": os.getpid(), "forwards": recs}).encode())
    except OSError:
        pass  # best effort: this process's own API and UI still know them


@dataclass(frozen=True)
class PortRecord:
    """A forward some live forkdeck process holds (what ``forkdeck ports`` lists)."""

    pid: int
    branch: str
    service: str | None
    port: int
    host_port: int
    url: str
    status: str
    workspace: str


def ports_records(workspace: str | os.PathLike[str] | None = None) -> list[PortRecord]:
    """Forwards of every live forkdeck process of this user (of ``workspace`` only, if
    given); records of processes that are gone are removed."""
    out: list[PortRecord] = []
    folder = records_dir()
    want = os.path.realpath(workspace) if workspace is not None else None
    try:
        files = sorted(folder.glob("*.json"))
    except OSError:
        return out
    for file in files:
        try:
            pid = int(file.stem)
        except ValueError:
            continue
        if not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                file.unlink()
            continue
        try:
            data = json.loads(file.read_text())
        except (OSError, ValueError):
            continue
        for rec in data.get("forwards", []):
            ws = str(rec.get("workspace", ""))
            if want is not None and os.path.realpath(ws) != want:
                continue
            out.append(PortRecord(pid, str(rec["branch"]), rec.get("service"),
                                  int(rec["port"]), int(rec["host_port"]), str(rec["url"]),
                                  str(rec.get("status", "")), ws))
    return out


__all__ = ["BranchNetwork", "PortRecord", "add_forward_listener", "forwards_of_process",
           "live_networks", "ports_records", "records_dir"]
