"""Sibling sandboxes share their compiled steps although each branch mounts a view.

The socket plan lists the mount points of the tree a sandbox starts from; a new branch
adds its view's mount there (in the stores, which the sandbox hides anyway). Only the
mount points that hold or lie below an overlaid or kept directory decide a compiled
step, so only those may key the compile cache: with every mount point in the key, each
new branch compiled its ~140 steps afresh and missed the executors' caches (issue 29).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from branching_core import Workspace
from branching_core.sandbox.host_sockets import SocketPlan
from branching_core.sandbox.masks import keep_candidates
from branching_core.sandbox.namespaces import plan_sandbox
from branching_core.sandbox.steps import CompiledSteps, _decisive


def test_a_new_branch_reuses_the_compiled_steps_of_the_last(tmp_path: Path,
                                                             sandbox_ok: None) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root)
    with ws.branch("a", on_success=None) as a:
        first = plan_sandbox(a.path, network=False, mount_at=None)
        first.close_fds()
        with ws.branch("b", on_success=None) as b:  # a mount more in the view helper
            second = plan_sandbox(b.path, network=False, mount_at=None)
            second.close_fds()
    assert isinstance(first.steps, CompiledSteps) and isinstance(second.steps, CompiledSteps)
    assert first.view != second.view
    # the view-independent part is the very same object: converted and encoded once
    assert first.steps.parts[1] is second.steps.parts[1]


def test_only_mount_points_that_decide_a_step_are_kept() -> None:
    plan = SocketPlan(
        overlay_dirs=("/etc", "/usr"),
        socket_files=("/srv/x.sock",),
        mount_points=("/", "/mnt/data", "/root/.cache/stores/w/b1/view", "/tmp",
                      "/tmp/kept/inner", "/usr/local"),
    )
    out = _decisive(plan, ("/tmp/kept",))
    # "/" holds everything, "/tmp" holds the kept dir, "/tmp/kept/inner" and
    # "/usr/local" lie below a kept and an overlaid dir; a view in the stores and an
    # unrelated mount decide nothing
    assert out.mount_points == ("/", "/tmp", "/tmp/kept/inner", "/usr/local")
    assert out.overlay_dirs == plan.overlay_dirs and out.socket_files == plan.socket_files
    # the answers the compiler asks for are the same on the reduced plan
    for path in ("/etc", "/usr", "/tmp/kept"):
        assert out.containing_mount(path) == plan.containing_mount(path)
        assert out.has_mount_below(path) == plan.has_mount_below(path)
    # without shared stages no mount point is asked about at all
    assert _decisive(plan, None).mount_points == ()


def test_kept_candidates_follow_path_and_sys_path(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    """The candidates for kept directories are remembered between sandboxes, and made
    again as soon as ``PATH`` or ``sys.path`` names another directory."""
    first = keep_candidates()
    assert keep_candidates() is first  # remembered
    tools = tmp_path / "tools-bin"
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
    assert str(tools) in keep_candidates()
    lib = tmp_path / "libdir"
    monkeypatch.syspath_prepend(str(lib))
    assert str(lib) in keep_candidates()
    monkeypatch.undo()
    assert keep_candidates() == first
