"""A sandbox's network mode: ``none``, ``private`` or ``host``, or a branch's namespace.

* ``none``: a fresh network namespace with only loopback (a few ms; the default).
* ``private``: a namespace of its own with loopback and outbound access through a
  user-mode stack (``netstack``): ``pip install`` works, the sandbox's ports are its own
  (about 50 ms more: the stack starts).
* ``host``: the host's network, and its unix sockets (no isolation of ports).
* a ``NetNamespace``: join that namespace (a branch's, shared with its services).

``network=True``/``False`` keep their old meaning (``host``/``none``). A ``private``
sandbox owns its namespace: it ends with the sandbox.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Literal, Union

from branching_core.errors import InvalidArgumentError, InvalidTypeError, NamespaceError
from branching_core.sandbox.namespaces import SandboxPlan
from branching_core.sandbox.netstack import NetNamespace, NetworkUnavailable

log = logging.getLogger(__name__)

NetworkMode = Literal["none", "private", "host"]
MODES: tuple[NetworkMode, ...] = ("none", "private", "host")
NetworkArg = Union[bool, str, NetNamespace, None]  # noqa: UP007 - a runtime alias


def parse_mode(value: str) -> NetworkMode:
    """``none``/``private``/``host`` (case-insensitive); ValueError with the choices."""
    text = value.strip().lower()
    if text not in MODES:
        raise InvalidArgumentError(f"unknown network mode {value!r}: choose none, private or host")
    return text


@dataclass(frozen=True)
class NetworkPolicy:
    """How ``private`` is provided: which stack, and what to do when none is usable.

    ``fallback``: ``None`` (fail with the reason: the default), ``"none"`` (a loopback-only
    namespace, with a warning) or ``"host"``. Set by the user (``[sandbox]
    network_stack``/``network_fallback``), never silently.
    """

    stack: str = "auto"
    fallback: NetworkMode | None = None


_policy = NetworkPolicy()


def set_policy(policy: NetworkPolicy) -> None:
    """The process-wide policy for ``private`` (the CLI and the app set it from config)."""
    global _policy
    _policy = policy


def policy() -> NetworkPolicy:
    return _policy


def private_namespace(userns_pid: int | None = None,
                      policy_: NetworkPolicy | None = None) -> NetNamespace:
    """A new ``private`` namespace under the policy; raises ``NetworkUnavailable``
    unless the policy allows the loopback-only fallback."""
    pol = policy_ or _policy
    try:
        return NetNamespace(outbound=True, stack=pol.stack, userns_pid=userns_pid)
    except NetworkUnavailable as exc:
        if pol.fallback != "none":
            raise
        log.warning("%s; falling back to a loopback-only network ([sandbox] "
                    "network_fallback = \"none\")", exc)
        return NetNamespace(outbound=False, userns_pid=userns_pid)


@dataclass
class NetworkChoice:
    """What a sandbox does about its network, resolved from ``network=``."""

    mode: str  # none | private | host | joined
    host: bool = False
    namespace: NetNamespace | None = None
    owned: bool = False  # made for this sandbox: closed when it ends
    _fds: list[int] = field(default_factory=list[int])

    def apply(self, plan: SandboxPlan) -> None:
        """Make ``plan`` join the namespace (and the user namespace owning it)."""
        plan.network_mode = self.mode
        if self.namespace is None:
            return
        ns = self.namespace
        plan.netns_fd = ns.open_fd()
        plan.network_mode = f"{self.mode}:{ns.inode()}"
        users = ns.open_userns_fd()
        if users is None:
            return
        if plan.userns_fd is not None:
            mine = os.fstat(plan.userns_fd).st_ino
            if os.fstat(users).st_ino != mine:
                os.close(users)
                raise NamespaceError("the branch's network namespace belongs to another user "
                                     "namespace than its view (make it with userns_pid)")
            os.close(users)
            return
        plan.userns_fd = users
        plan.new_userns = False

    def release(self) -> None:
        """The sandbox ended: close a namespace made for it."""
        if self.owned and self.namespace is not None:
            self.namespace.close()


def resolve_network(network: NetworkArg | object, helper_pid: int | None = None
                    ) -> NetworkChoice:
    """Turn ``network=`` into a ``NetworkChoice`` (may start a ``private`` namespace).

    Takes any object: ``network=`` also arrives from untyped callers and configuration,
    and anything but a ``NetworkArg`` is refused here with a TypeError."""
    if isinstance(network, NetNamespace):
        return NetworkChoice("joined", namespace=network)
    if network is None or network is False:
        return NetworkChoice("none")
    if network is True:
        return NetworkChoice("host", host=True)
    if not isinstance(network, str):
        raise InvalidTypeError(f"network must be none, private, host or a NetNamespace, "
                               f"not {network!r}")
    mode = parse_mode(network)
    if mode == "host":
        return NetworkChoice("host", host=True)
    if mode == "none":
        return NetworkChoice("none")
    try:
        ns = private_namespace(helper_pid)
    except NetworkUnavailable:
        if _policy.fallback == "host":
            log.warning("private network unavailable; using the host's network "
                        "([sandbox] network_fallback = \"host\")")
            return NetworkChoice("host", host=True)
        raise
    return NetworkChoice("private", namespace=ns, owned=True)


def is_host(network: NetworkArg) -> bool:
    """Whether ``network=`` means the host's network (no namespace: sockets visible)."""
    return network is True or (isinstance(network, str) and network.strip().lower() == "host")


__all__ = ["MODES", "NetworkArg", "NetworkChoice", "NetworkMode", "NetworkPolicy",
           "parse_mode", "policy", "private_namespace", "resolve_network", "set_policy"]
