"""One name, one meaning: no two engine modules export different things under one name.

Issue 15: ``BranchState``, ``ForkHandle`` and ``Settings`` each existed twice with
different meanings (a workspace branch's state and a fork branch's state, a forked child
process and a fork of an agent run, the config file and what sub-agents inherit), and
``ForkError`` read like a failed agent fork although it means ``os.fork()`` failed.
"""

from __future__ import annotations

import importlib
import pkgutil

import branching_core
from branching_core.errors import ForkError, ProcessBranchError, ProcessForkError

# Entry points that run code on import; they export nothing.
_SKIP = {"branching_core.workspace._mount_helper_main", "branching_core.cli.__main__"}


def _exported() -> dict[str, dict[str, object]]:
    """``name -> {module: object}`` over every module's ``__all__``."""
    seen: dict[str, dict[str, object]] = {}
    for info in pkgutil.walk_packages(branching_core.__path__, "branching_core."):
        if info.name in _SKIP:
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            seen.setdefault(name, {})[info.name] = getattr(module, name)
    return seen


def _one_meaning(objects: list[object]) -> bool:
    """The same object everywhere (issue 23 removed the last exception: a second class
    named ``ForkCoordinator`` that specialised the first)."""
    return len({id(obj) for obj in objects}) == 1


def test_every_exported_name_means_one_thing() -> None:
    clashes = {
        name: sorted(where)
        for name, where in _exported().items()
        if not _one_meaning(list(where.values()))
    }
    assert clashes == {}


def test_the_seed_name_for_a_failed_os_fork_is_the_same_class() -> None:
    assert ForkError is ProcessForkError
    assert issubclass(ProcessForkError, ProcessBranchError)
    assert branching_core.ForkError is branching_core.ProcessForkError
