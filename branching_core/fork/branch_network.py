"""Each fork branch's own localhost: a ``BranchNetwork`` per branch, joined by its tools.

``ForkOptions(network=network_setup(settings, purpose="agent"))`` gives every local fork
branch its own network namespace (``private``: outbound access too), in which the
branch's ``run_command`` calls run and its declared services keep running across its
commands and model turns: a fork branch's ``curl localhost:8000`` reaches its own server.
The network is made when the branch's toolset is first built and closes with the
workspace branch (merge, abort, terminate, exit: ``Branch.add_close_hook``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import threading
from typing import Any

from branching_core.agent.commands import SandboxCommandRunner

log = logging.getLogger(__name__)
_WS_NAME = re.compile(r"^fork-[0-9A-Za-z]+-\d+-(.+)$")


class ForkNetworks:
    """The branch networks of one coordinator's branches, made on first use."""

    def __init__(self, setup: Any) -> None:
        self.setup = setup  # a branching_core.sandbox.net_settings.NetworkSetup
        self._nets: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def for_branch(self, branch: Any) -> Any:
        """The ``BranchNetwork`` of workspace ``branch`` (a new one if it was closed).

        Branches are made in parallel (one lock per branch): a branch waiting for its
        services never holds up another's."""
        key = str(getattr(branch, "id", id(branch)))
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            net = self._nets.get(key)
            if net is None or net.closed:
                name = str(getattr(branch, "name", ""))
                match = _WS_NAME.match(name)  # fork-<id>-<i>-<label>: shown as <label>
                net = self._nets[key] = self.setup.for_branch(
                    branch, label=match.group(1) if match else name)
            return net

    def close_all(self) -> None:
        """Stop every branch's services and forwards and end its namespace, leaving the
        branches themselves alone: a fork left open for recovery (``ChatSession.aclose``)
        keeps its files, and its branches get fresh networks when it is reopened."""
        with self._lock:
            nets, self._nets = list(self._nets.values()), {}
        for net in nets:
            try:
                net.close()
            except Exception as exc:  # one stuck service must not keep the others up
                log.warning("closing the network of %s: %s", getattr(net, "label", net), exc)

    def start_soon(self, branch: Any) -> None:
        """Make the branch's network (and start its autostart services) in a thread now,
        so they are up when the branch starts, not at its first command."""
        if any(s.autostart for s in self.setup.services):
            threading.Thread(target=self._start_quietly, args=(branch,), daemon=True,
                             name="forkdeck-branch-network").start()

    def _start_quietly(self, branch: Any) -> None:
        try:
            self.for_branch(branch)
        except Exception as exc:  # the branch's first command reports it again
            log.warning("starting the network of %s: %s", getattr(branch, "name", branch), exc)

    def runner(self, branch: Any, base: Any) -> Any:
        """``base`` (the fork's command runner, None: the sandbox's) joining the branch's
        network; a custom runner without a ``network`` field is used as it is.

        The network is made (and its autostart services started) on the branch's first
        command, in a worker thread: building a toolset never blocks the event loop.
        """
        if base is None:
            base = SandboxCommandRunner()
        if not (dataclasses.is_dataclass(base) and not isinstance(base, type) and any(
                f.name == "network" for f in dataclasses.fields(base))):
            return base
        self.start_soon(branch)
        return _BranchRunner(self, branch, base)


@dataclasses.dataclass
class _BranchRunner:
    """A command runner that runs each command in its branch's network."""

    networks: ForkNetworks
    branch: Any
    base: Any

    async def __call__(self, command: str, **kwargs: Any) -> Any:
        net = await asyncio.to_thread(self.networks.for_branch, self.branch)
        runner = dataclasses.replace(self.base, network=net.network)
        return await runner(command, **kwargs)


__all__ = ["ForkNetworks"]
