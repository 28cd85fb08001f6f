# pyright: strict
"""The node side of a fork branch on the cluster: one Ray actor per branch.

The actor takes the node's cached copy of the fork's snapshot (built once per node,
``node_cache``), opens a copy-on-write branch of it with the ordinary ``Workspace`` (the
same overlay/reflink/copy backends as on one machine) and builds the branch's tools on
it with the ``make_tools`` factory the driver sends (the fork layer's workspace
toolset: file tools and the sandboxed ``run_command`` with the same ``ResourceLimits``).
Every tool call of the branch's model runs here; what goes back to the driver is the
tool's text, or, when asked, the branch's delta against the snapshot.

This module never imports the agent layer: the toolset arrives as a value, so the
cluster layer stays below the agent layer (DESIGN.md "Layers").
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from branching_core.cluster.delta import Delta, collect
from branching_core.cluster.node_cache import acquire, cache_root
from branching_core.cluster.snapshot import entry_for
from branching_core.cluster.task import ShippedSnapshot, fetchers, workspace_on
from branching_core.errors import InvalidStateError

MakeTools = Callable[[str], Any]
"""``make_tools(branch_path)``: an object whose methods are the branch's tools."""


class BranchHost:
    """One fork branch's files and tools on a node (made a Ray actor by the driver)."""

    def __init__(self, snap: ShippedSnapshot, name: str, make_tools: MakeTools) -> None:
        import ray

        self.node_id: str = ray.get_runtime_context().get_node_id()
        root = cache_root(snap.cache_dir)
        self._held = acquire(root, snap.key, *fetchers(snap), snap.cache_bytes)
        try:
            ws = workspace_on(self._held.tree, self._held.store)
            self._branch = ws.branch(name, on_success=None, on_error=None)
            self._tools = make_tools(str(self._branch.path))
        except BaseException:
            self._held.release()
            raise

    async def ready(self) -> tuple[str, bool, int]:
        """Where the branch lives, whether this actor built the node's snapshot copy, and
        the actor's process id on its node."""
        return self.node_id, self._held.materialised, os.getpid()

    async def call(self, tool: str, kwargs: dict[str, Any]) -> tuple[bool, Any]:
        """Run one tool: ``(True, text)``, or ``(False, exception)`` for the driver to raise
        (a ``ToolFailed`` the model reads, as locally)."""
        if self._branch is None or not self._branch.is_open:
            return False, InvalidStateError("this branch is closed")
        try:
            result = getattr(self._tools, tool)(**kwargs)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            return False, exc
        return True, result

    async def delta(self) -> Delta:
        """What the branch changed against the snapshot (only that, never the tree)."""
        return await asyncio.to_thread(collect, self._branch, self._held.tree)

    async def base(self, paths: Sequence[str]) -> Delta:
        """The snapshot's own state of ``paths``, as a delta that restores them (a path the
        snapshot lacks is a delete): how the driver's view forgets a change the branch undid."""
        return await asyncio.to_thread(base_delta, self._held.tree, paths)

    async def close(self) -> None:
        """Abort the branch (unmount, remove its layer) and let go of the cached snapshot."""
        branch, self._branch = self._branch, None
        try:
            if branch is not None and branch.is_open:
                await asyncio.to_thread(branch.abort)
        finally:
            self._held.release()


def base_delta(tree: Path, paths: Sequence[str]) -> Delta:
    out = Delta()
    for rel in sorted(paths, key=lambda r: r.count("/")):
        entry = entry_for(tree / rel)
        if entry is None:
            out.deleted.append(rel)
        elif entry[0] == "d":
            out.dirs[rel] = entry[1]
        elif entry[0] == "l":
            out.symlinks[rel] = entry[1]
        elif entry[0] == "f":
            out.files[rel] = (entry[1], (tree / rel).read_bytes())
    return out


__all__ = ["BranchHost", "MakeTools", "base_delta"]
