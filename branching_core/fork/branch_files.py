"""The "branch files" port: where a fork's branches keep their files, and the tools
that reach them.

The coordinator asks its ``BranchFiles`` for the branches of a new fork (``open``) and
for each branch run's workspace toolset (``toolset``). Everything else the fork layer
does with a branch (``changes()``, ``path``, ``commit()``, ``abort()``, ``is_open``: the
diff report, the mirror, the merge) goes through the branch object ``open`` returned,
which offers that part of a local workspace ``Branch``'s interface. So where the files
live is decided in one place, not by ``if remote`` checks in the run loop and the merge.

* :class:`LocalBranchFiles` is the default: durable copy-on-write branches of the parent
  on this machine, tools bound to each branch's directory.
* :class:`RunnerBranchFiles` hands the branches to a runner that can host them
  (``ForkCoordinator(..., runner=RayRunner())``: one Ray actor per branch on a worker
  node, see ``branching_core.cluster.fork_branch``). The branch's tools are built on the
  node by the same ``create_workspace_toolset`` (same sandbox, same ``ResourceLimits``),
  and the toolset the model sees here forwards each call to the branch's ``call_tool``.

The fork layer never imports the cluster layer: the runner comes in through
``ForkOptions.runner`` and is used only through :class:`BranchHostingRunner`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from branching_core.agent import create_workspace_toolset
from branching_core.agent.forwarded_tools import forwarded_workspace_toolset
from branching_core.errors import InvalidTypeError

HOSTED_ID_PREFIXES = ("ray:",)
"""How the id of a branch hosted elsewhere begins (a local workspace branch id never does)."""
HOSTED_LOST = (
    "lost: its files lived in a Ray actor on a worker node, which ended with the process "
    "that ran the fork (branches on a cluster cannot be recovered)"
)


def is_hosted_id(workspace_branch_id: object) -> bool:
    return isinstance(workspace_branch_id, str) and workspace_branch_id.startswith(
        HOSTED_ID_PREFIXES)


class BranchFiles(Protocol):
    """Makes a fork's branches and their workspace toolsets (see the module docstring)."""

    def open(self, parent: Any, names: Sequence[str]) -> list[Any]:
        """One branch of ``parent`` (workspace or open branch) per name, all or none."""
        ...

    def toolset(self, branch: Any, *, command_timeout: float = 60.0) -> Any:
        """The workspace toolset (file tools and ``run_command``) acting on ``branch``."""
        ...


@runtime_checkable
class BranchHostingRunner(Protocol):
    """A runner that can keep fork branches' files elsewhere (``RayRunner``)."""

    def open_fork_branches(
        self, parent: Any, names: Sequence[str], make_tools: Callable[[str], Any], *,
        live_view: bool = False,
    ) -> list[Any]:
        """One hosted branch per name; each offers ``call_tool(name, kwargs)``, runs
        ``make_tools(path)`` where its files are, and shows them at ``path`` here."""
        ...


class _RemoteBranch(Protocol):
    def call_tool(self, tool: str, kwargs: dict[str, Any]) -> Awaitable[Any]: ...


@dataclass(frozen=True)
class LocalBranchFiles:
    """Durable copy-on-write branches of the parent on this machine (the default)."""

    command_runner: Any = None
    networks: Any = None  # ForkNetworks: each branch's own network and services

    def open(self, parent: Any, names: Sequence[str]) -> list[Any]:
        return list(parent.branch_many(list(names), on_success=None, on_error=None,
                                       durable=True))

    def toolset(self, branch: Any, *, command_timeout: float = 60.0) -> Any:
        runner = self.command_runner
        if self.networks is not None:
            runner = self.networks.runner(branch, runner)
        return create_workspace_toolset(branch.path, command_runner=runner,
                                        command_timeout=command_timeout,
                                        on_replace=getattr(branch, "note_replacing", None))


@dataclass(frozen=True)
class RunnerBranchFiles:
    """Branches hosted by ``runner`` (see the module docstring).

    ``live_view``: refresh each branch's local view after every tool call that writes
    (what the on-disk mirror needs); otherwise the view is refreshed when read.
    ``command_timeout`` of a branch's ``run_command`` is fixed when the branch opens,
    since its tools are built on the node then.
    """

    runner: BranchHostingRunner
    command_runner: Any = None
    command_timeout: float = 60.0
    live_view: bool = False

    def open(self, parent: Any, names: Sequence[str]) -> list[Any]:
        make_tools = functools.partial(create_workspace_toolset,
                                       command_runner=self.command_runner,
                                       command_timeout=self.command_timeout)
        return self.runner.open_fork_branches(parent, list(names), make_tools,
                                              live_view=self.live_view)

    def toolset(self, branch: _RemoteBranch, *, command_timeout: float = 60.0) -> Any:
        return forwarded_workspace_toolset(branch.call_tool)


def branch_files_for(runner: Any, *, command_runner: Any = None,
                     live_view: bool = False, networks: Any = None) -> BranchFiles:
    """The port for ``ForkOptions.runner``: local unless the runner hosts branches."""
    if runner is None or not getattr(runner, "remote", False):
        return LocalBranchFiles(command_runner, networks)
    if not isinstance(runner, BranchHostingRunner):
        raise InvalidTypeError(f"runner {runner!r} cannot host fork branches "
                               "(it has no open_fork_branches)")
    return RunnerBranchFiles(runner, command_runner, live_view=live_view)


__all__ = [
    "HOSTED_ID_PREFIXES",
    "HOSTED_LOST",
    "BranchFiles",
    "BranchHostingRunner",
    "LocalBranchFiles",
    "RunnerBranchFiles",
    "branch_files_for",
    "is_hosted_id",
]
