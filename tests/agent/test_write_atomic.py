"""``write_file`` and ``edit_file`` replace a file in one rename: a process killed mid-write
leaves the old content, never an empty or half-written file a recovered branch would merge."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from branching_core.agent import WorkspaceToolset
from branching_core.atomicio import atomic_write, is_atomic_temp

from ..support.killed_child import REPO

LIMIT = 1024 * 1024

CHILD = """
import signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; the kernel should kill
from branching_core.agent import LocalCommandRunner, create_workspace_toolset
tools = create_workspace_toolset(sys.argv[1], command_runner=LocalCommandRunner())
if sys.argv[2] == "write":
    tools.write_file("data.txt", "y" * (8 * 1024 * 1024))
else:
    tools.edit_file("data.txt", "old", "n" * (8 * 1024 * 1024))
"""


def _kill_mid_write(ws: Path, tool: str) -> subprocess.CompletedProcess[str]:
    """Run ``tool`` in a child whose file-size limit kills it (SIGXFSZ) after 1 MB: a kill
    at a known point in the middle of the write, every time."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))

    return subprocess.run(
        [sys.executable, "-c", CHILD, str(ws), tool],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_kill_mid_write_leaves_the_old_content(ws: Path) -> None:
    for tool in ("write", "edit"):
        data = ws / "data.txt"
        data.write_text("old content\n")
        data.chmod(0o640)
        proc = _kill_mid_write(ws, tool)
        assert proc.returncode == -signal.SIGXFSZ, proc.stderr
        assert data.read_text() == "old content\n"
        assert data.stat().st_mode & 0o777 == 0o640
        leftovers = [p for p in os.listdir(ws) if is_atomic_temp(p)]
        assert len(leftovers) == 1  # the killed writer's temp file, recognisable as such
        (ws / leftovers[0]).unlink()


def test_write_keeps_the_mode_and_leaves_no_temp(tools: WorkspaceToolset, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o755)
    assert tools.write_file("run.sh", "echo new\n").startswith("overwrote")
    assert script.read_text() == "echo new\n" and script.stat().st_mode & 0o777 == 0o755
    tools.edit_file("run.sh", "new", "newer")
    assert script.stat().st_mode & 0o777 == 0o755
    assert tools.write_file("fresh.txt", "x").startswith("created")
    assert (ws / "fresh.txt").stat().st_mode & 0o777 == 0o644
    assert not [p for p in os.listdir(ws) if is_atomic_temp(p)]


def test_write_through_an_inside_symlink_keeps_the_link(tools: WorkspaceToolset, ws: Path) -> None:
    (ws / "link.py").symlink_to("src/app.py")
    tools.write_file("link.py", "print(1)\n")
    assert (ws / "link.py").is_symlink()
    assert (ws / "src" / "app.py").read_text() == "print(1)\n"


def test_atomic_write_fails_cleanly(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    try:
        atomic_write(tmp_path / "d", b"x")
    except IsADirectoryError:
        pass
    else:
        raise AssertionError("a directory was replaced")
    assert (tmp_path / "d").is_dir() and os.listdir(tmp_path) == ["d"]
    long_name = "n" * 255  # the temp name does not grow with the target's
    atomic_write(tmp_path / long_name, b"ok", durable=True)
    assert (tmp_path / long_name).read_bytes() == b"ok"
