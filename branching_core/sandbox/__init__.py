"""Sandboxed process branches with enforced resource limits.

``BranchContext`` runs a Python callable and ``SandboxedCommand``/``run_command`` a
command line in a child that has its own user (when not root), mount, pid, ipc,
uts and (unless ``network=True``) network namespaces, sees the host read-only
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


__all__ = [
    "BranchContext",
    "CommandResult",
    "NamespaceError",
    "ProcessBranchError",
    "ResourceLimitError",
    "ResourceLimits",
    "SandboxedCommand",
    "leftover_branch_cgroups",
    "parse_memory",
    "parse_view_path",
    "run_command",
    "run_command_async",
    "sandbox_available",
]
