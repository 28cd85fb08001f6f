"""From settings (``[sandbox] network``, ``[services.*]``) and a ``--network`` flag to what
a front door needs: the mode, the services, the policy for ``private``.

Every front door (``forkdeck run``, the pattern commands, ``forkdeck agents``, the TUI's
fork branches) calls ``network_setup`` and then ``setup.for_branch(branch)`` (a
``BranchNetwork`` that closes with the branch) or ``setup.sandbox_network()`` (what to
pass as ``network=`` to a one-off sandbox). The default is ``private`` for agents and
for commands with declared services, ``none`` for plain commands; a defaulted (not
chosen) ``private`` falls back to ``none`` with a warning when no stack is installed,
while a chosen one fails with the package to install.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from branching_core.config.schema import Settings
from branching_core.sandbox.branch_net import BranchNetwork
from branching_core.sandbox.network import (
    NetworkArg,
    NetworkMode,
    NetworkPolicy,
    parse_mode,
    set_policy,
)
from branching_core.sandbox.services import ServiceSpec

if TYPE_CHECKING:
    from branching_core.workspace.branch import Branch

Purpose = Literal["agent", "command"]


@dataclass(frozen=True)
class NetworkSetup:
    """The network every branch of one run gets (see the module docstring)."""

    mode: NetworkMode = "none"
    services: tuple[ServiceSpec, ...] = ()
    policy: NetworkPolicy = field(default_factory=NetworkPolicy)
    chosen: bool = False  # the user asked for this mode (no silent fallback)

    def for_branch(self, branch: Branch, **kwargs: Any) -> BranchNetwork:
        """A ``BranchNetwork`` for workspace ``branch``: its namespace, its services
        (autostart ones started), closed with the branch."""
        kwargs.setdefault("mode", self.mode)
        kwargs.setdefault("services", self.services)
        kwargs.setdefault("policy", self.policy)
        return BranchNetwork.for_branch(branch, **kwargs)

    def for_path(self, path: str | os.PathLike[str], *, label: str, **kwargs: Any
                 ) -> BranchNetwork:
        """The same for a directory that is no workspace branch (close it yourself)."""
        kwargs.setdefault("mode", self.mode)
        kwargs.setdefault("services", self.services)
        kwargs.setdefault("policy", self.policy)
        return BranchNetwork(path, label=label, **kwargs)

    def sandbox_network(self) -> NetworkArg:
        """``network=`` for a one-off sandbox (a ``private`` one owns its namespace)."""
        return self.mode

    @property
    def needs_branch_network(self) -> bool:
        """Whether branches need a persistent namespace (services to share it with)."""
        return bool(self.services) and self.mode != "host"


def network_setup(settings: Settings | None = None, *, override: str | None = None,
                  purpose: Purpose = "command") -> NetworkSetup:
    """The setup for one run from ``Settings`` (or None) and a ``--network`` value.

    Also makes the policy the process-wide one for ``network="private"`` sandboxes.
    """
    if settings is None:
        settings = Settings()
    configured = settings.sandbox_network
    services = tuple(ServiceSpec.from_config(name, cfg) for name, cfg in settings.services.items())
    fallback = settings.network_fallback
    policy = NetworkPolicy(stack=settings.network_stack or "auto",
                           fallback=parse_mode(fallback) if fallback else None)
    chosen = override is not None or configured is not None
    if override is not None:
        mode = parse_mode(override)
    elif configured is not None:
        mode = parse_mode(configured)
    else:
        mode = "private" if purpose == "agent" or services else "none"
    if not chosen and mode == "private" and policy.fallback is None:
        policy = replace(policy, fallback="none")  # a default never fails for want of pasta
    set_policy(policy)
    return NetworkSetup(mode=mode, services=services, policy=policy, chosen=chosen)


__all__ = ["NetworkSetup", "Purpose", "network_setup"]
