"""A filesystem mounted after the first workspace opened still gets the overlay backend.

The mount helper's namespace is a private copy of the host's mounts taken when it
started; a workspace on a tmpfs mounted later was handed the slow copy backend (and
``backend="overlay"`` raised) because the helper saw the directory underneath. The test
runs in a child in its own mount namespace (``unshare --mount``) so the tmpfs it mounts
never appears on the host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root (mounting a tmpfs) and util-linux unshare",
)

_SCRIPT = textwrap.dedent(
    """
    import subprocess, sys
    from pathlib import Path
    from branching_core import Workspace
    from branching_core.workspace.mount_helper import shutdown_shared_helper

    base = Path(sys.argv[1])
    first = Workspace(base / "first", backend="overlay")
    branch = first.branch("before")
    (branch.path / "a.txt").write_text("first")
    late = base / "late"
    late.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(late)], check=True)
    (late / "ws").mkdir()
    (late / "ws" / "f.txt").write_text("on tmpfs")
    auto = Workspace(late / "ws")
    print("auto", auto.fstype)
    forced = Workspace(late / "ws", backend="overlay")
    b = forced.branch("x")
    print("read", (b.path / "f.txt").read_text())
    (b.path / "g.txt").write_text("branch")
    b.commit()
    print("landed", (late / "ws" / "g.txt").read_text())
    # the first workspace's view is still served by the helper that mounted it
    print("first", (branch.path / "a.txt").read_text())
    branch.commit()
    print("first landed", (base / "first" / "a.txt").read_text())
    shutdown_shared_helper()
    """
)


def test_a_tmpfs_mounted_after_the_first_workspace_gets_overlay(tmp_path: Path) -> None:
    (tmp_path / "first").mkdir()
    run = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", _SCRIPT,
         str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "auto overlay", "read on tmpfs", "landed branch", "first first", "first landed first",
    ]
