"""Sandboxed process branches with enforced resource limits.

``BranchContext`` runs a Python callable and ``SandboxedCommand``/``run_command`` a
command line in a child that has its own user (when not root), mount, pid, ipc,
uts and network namespaces (``network="none"``, the default; ``"private"`` adds outbound
access through pasta/slirp4netns; ``"host"``/``True`` shares the host's; a branch's
``NetNamespace`` is joined: see ``network`` and ``branch_net``), sees the host read-only
except the branch directory and a private ``/tmp``, reaches no host unix socket
(without ``network=True``), no branch store and (unless ``expose_secrets=True``) no
home or credential file, keeps at most ``max_output`` bytes of each output stream,
and dies with its whole process tree on abort, timeout or the caller's exit.
``ResourceLimits`` are validated in the caller, enforced with cgroup v2 where
delegated, else v1, never silently dropped, and swept if their owner was killed.

Only the standard library is used here (this layer sits below the UI and agents).
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from typing import TYPE_CHECKING

from branching_core.errors import NamespaceError, ProcessBranchError, ResourceLimitError
from branching_core.sandbox.cgroups import leftover_branch_cgroups
from branching_core.sandbox.command import (
    CommandResult,
    SandboxedCommand,
    run_command,
    run_command_async,
)
from branching_core.sandbox.context import BranchContext
from branching_core.sandbox.limits import ResourceLimits, parse_memory
from branching_core.sandbox.namespaces import parse_view_path
from branching_core.sandbox.netstack import NetNamespace, NetworkUnavailable
from branching_core.sandbox.network import NetworkMode, NetworkPolicy

if TYPE_CHECKING:  # loaded on first use (``__getattr__``)
    from branching_core.sandbox.branch_net import (
        BranchNetwork,
        add_forward_listener,
        live_networks,
        ports_records,
    )
    from branching_core.sandbox.forwards import Forward
    from branching_core.sandbox.net_settings import NetworkSetup, network_setup
    from branching_core.sandbox.privileges import unprivileged_limits
    from branching_core.sandbox.services import Service, ServiceError, ServiceSpec


def _probe(path: object) -> str:
    return "ok"


@functools.lru_cache(maxsize=1)
def sandbox_available() -> tuple[bool, str]:
    """Whether full isolation works here, and if not, the one-line reason.

    It starts one real sandbox (about 10 ms, once per process). There is no silent
    fallback: when this is false every sandbox raises ``NamespaceError``. A caller
    that accepts weaker isolation must choose that itself (for example run the
    command with ``subprocess`` in the branch directory and tell the user so).
    """
    scratch = tempfile.mkdtemp(prefix="forkdeck-probe-")
    try:
        with BranchContext(_probe, scratch) as ctx:
            ctx.wait(timeout=30)
        return True, "user/mount/pid/ipc/uts/net namespaces, read-only host, private /tmp"
    except (NamespaceError, ProcessBranchError, TimeoutError, OSError) as exc:
        return False, str(exc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def __getattr__(name: str) -> object:
    """``BranchNetwork``, ``ServiceSpec``, ``network_setup``...: loaded on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_LAZY = {
    "BranchNetwork": "branching_core.sandbox.branch_net",
    "ports_records": "branching_core.sandbox.branch_net",
    "live_networks": "branching_core.sandbox.branch_net",  # every branch network up now
    "add_forward_listener": "branching_core.sandbox.branch_net",  # a port forward opened
    "unprivileged_limits": "branching_core.sandbox.privileges",  # what a user cannot cap
    "Forward": "branching_core.sandbox.forwards",
    "Service": "branching_core.sandbox.services",
    "ServiceError": "branching_core.sandbox.services",
    "ServiceSpec": "branching_core.sandbox.services",
    "NetworkSetup": "branching_core.sandbox.net_settings",
    "network_setup": "branching_core.sandbox.net_settings",
}

__all__ = [
    "BranchContext",
    "BranchNetwork",
    "CommandResult",
    "Forward",
    "NamespaceError",
    "NetNamespace",
    "NetworkMode",
    "NetworkPolicy",
    "NetworkSetup",
    "NetworkUnavailable",
    "ProcessBranchError",
    "ResourceLimitError",
    "ResourceLimits",
    "SandboxedCommand",
    "Service",
    "ServiceError",
    "ServiceSpec",
    "add_forward_listener",
    "leftover_branch_cgroups",
    "live_networks",
    "network_setup",
    "parse_memory",
    "parse_view_path",
    "ports_records",
    "run_command",
    "run_command_async",
    "sandbox_available",
    "unprivileged_limits",
]
