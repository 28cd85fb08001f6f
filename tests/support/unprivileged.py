"""Run a test scenario as an unprivileged user, because real users are not root.

The scenario runs in a fresh ``/usr/bin/python3`` (root's pyenv interpreter is not
readable by other users) as uid/gid 65534 via ``setpriv``, with a world-readable copy
of ``branching_core`` on its path. Only the standard library is available there, which
is exactly what the workspace and sandbox layers need.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

NOBODY = 65534
SYSTEM_PYTHON = Path("/usr/bin/python3")
REPO = Path(__file__).resolve().parents[2]


def unprivileged_unavailable_reason() -> str | None:
    """Why the unprivileged scenarios cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root to switch to uid 65534 (the suite itself is not running as root)"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if not SYSTEM_PYTHON.exists():
        return f"{SYSTEM_PYTHON} is missing; root's interpreter is not readable by uid 65534"
    return None


requires_unprivileged = pytest.mark.skipif(
    unprivileged_unavailable_reason() is not None,
    reason=unprivileged_unavailable_reason() or "",
)


def make_world_readable_root() -> Path:
    """A scratch directory uid 65534 can use, holding a copy of branching_core."""
    root = Path(tempfile.mkdtemp(prefix="forkdeck-nobody-"))
    os.chmod(root, 0o755)
    shutil.copytree(
        REPO / "branching_core",
        root / "lib" / "branching_core",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for dirpath, dirnames, filenames in os.walk(root / "lib"):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)
    home = root / "home"  # the scenario's HOME: its cache holds the branch store
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    return root


def chown_tree(path: Path, uid: int = NOBODY, gid: int = NOBODY) -> None:
    os.chown(path, uid, gid)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, gid)


def run_as_nobody(
    script: str, *, root: Path, args: list[str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (Python source) as uid 65534; ``root`` comes from make_world_readable_root."""
    script_path = root / "scenario.py"
    script_path.write_text(script)
    os.chmod(script_path, 0o644)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root / "lib"), "HOME": str(root / "home")}
    return subprocess.run(
        [
            "setpriv",
            "--reuid",
            str(NOBODY),
            "--regid",
            str(NOBODY),
            "--clear-groups",
            str(SYSTEM_PYTHON),
            str(script_path),
            *(args or []),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def assert_scenario_ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, (
        f"scenario failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    return proc.stdout


__all__ = [
    "NOBODY",
    "assert_scenario_ok",
    "chown_tree",
    "make_world_readable_root",
    "requires_unprivileged",
    "run_as_nobody",
    "unprivileged_unavailable_reason",
]
