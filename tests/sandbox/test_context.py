"""BranchContext against real namespaces: isolation, tree death, typed results."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.errors import ProcessBranchError, WorkspaceError
from branching_core.sandbox import BranchContext, parse_view_path

from .conftest import processes_with, sleeping_with, start_view_helper, wait_until_gone


class CustomBranchError(Exception):
    """Defined at module level so the parent can unpickle it as itself."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message, code)
        self.code = code


def test_parse_view_path() -> None:
    assert parse_view_path("/proc/123/root/srv/ws") == (123, "/srv/ws")
    assert parse_view_path("/proc/123/root") == (123, "/")
    assert parse_view_path("/home/u/proj") == (None, "/home/u/proj")
    assert parse_view_path(Path("/proc/self/root/x")) == (None, "/proc/self/root/x")


def test_returns_typed_value_and_unflushed_stdout(ws: Path) -> None:
    def target(path: Path) -> tuple[int, str, frozenset[int]]:
        print("not flushed", end="")  # no newline, no flush: must still arrive
        sys.stderr.write("to stderr")
        return (1, str(path), frozenset({2}))

    with BranchContext(target, ws) as ctx:
        value = ctx.wait(timeout=30)
    assert value == (1, str(ws), frozenset({2}))
    assert type(value) is tuple
    assert ctx.result == value
    assert ctx.stdout == "not flushed"
    assert ctx.stderr == "to stderr"
    assert ctx.exit_code == 0 and not ctx.alive


def test_fifty_megabyte_result_arrives_intact(ws: Path) -> None:
    size = 50 * 1024 * 1024

    def target(path: Path) -> bytes:
        return bytes(range(256)) * (size // 256)

    with BranchContext(target, ws) as ctx:
        value = ctx.wait(timeout=60)
    assert len(value) == size
    assert value == bytes(range(256)) * (size // 256)


def test_large_output_does_not_deadlock(ws: Path) -> None:
    def target(path: Path) -> int:
        line = "x" * 1023 + "\n"
        for _ in range(20 * 1024):  # 20 MB on stdout, 1 MB on stderr
            sys.stdout.write(line)
        sys.stderr.write(line * 1024)
        return 7

    with BranchContext(target, ws) as ctx:
        assert ctx.wait(timeout=60) == 7
    # All 20 MB arrived (no deadlock); the caller keeps the default 8 MiB head + tail.
    assert ctx.stdout_dropped == 12 * 1024 * 1024
    assert ctx.stdout.startswith("x" * 1023 + "\n") and ctx.stdout.endswith("x\n")
    assert len(ctx.stderr) == 1024 * 1024 and ctx.stderr_dropped == 0


def test_custom_exception_comes_back_as_itself(ws: Path) -> None:
    def target(path: Path) -> None:
        raise CustomBranchError("nope", 42)

    with BranchContext(target, ws) as ctx, pytest.raises(ProcessBranchError) as info:
        ctx.wait(timeout=30)
    err = info.value
    assert isinstance(err.exception, CustomBranchError)
    assert err.exception.code == 42
    assert err.exc_type == f"{__name__}.CustomBranchError"
    # The frame is named; its source line may be missing when the test file lives under
    # /tmp, which the sandbox replaces with a private tmpfs.
    assert err.child_traceback is not None and "test_context.py" in err.child_traceback
    assert "in target" in err.child_traceback
    assert err.exit_code == 1


def test_unpicklable_exception_keeps_type_name_and_traceback(ws: Path) -> None:
    class LocalError(Exception):  # local class: cannot be pickled by reference
        pass

    def target(path: Path) -> None:
        raise LocalError("local")

    with BranchContext(target, ws) as ctx, pytest.raises(ProcessBranchError) as info:
        ctx.wait(timeout=30)
    assert info.value.exception is None
    assert info.value.exc_type is not None and info.value.exc_type.endswith("LocalError")
    assert "local" in str(info.value)
    assert "in target" in (info.value.child_traceback or "")


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A writable host directory outside /tmp (which the sandbox replaces)."""
    path = Path(tempfile.mkdtemp(prefix="forkdeck-outside-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_write_outside_branch_fails_and_never_reaches_host(
    ws: Path, tmp_path: Path, host_dir: Path
) -> None:
    outside = host_dir / "outside.txt"
    home_file = Path.home() / "forkdeck-sandbox-escape.txt"
    under_tmp = tmp_path / "under-tmp.txt"

    def target(path: Path) -> dict[str, str]:
        results = {}
        for victim in (outside, home_file, Path("/etc/forkdeck-escape")):
            try:
                victim.write_text("escaped")
                results[str(victim)] = "written"
            except OSError as exc:
                results[str(victim)] = type(exc).__name__
        (path / "inside.txt").write_text("ok")
        under_tmp.write_text("private tmp")  # /tmp is writable, but a private tmpfs
        results["cwd"] = os.getcwd()
        return results

    with BranchContext(target, ws) as ctx:
        results = ctx.wait(timeout=30)
    assert results.pop("cwd") == str(ws)
    assert set(results.values()) == {"OSError"}, results
    assert not outside.exists() and not home_file.exists()
    assert not Path("/etc/forkdeck-escape").exists()
    assert not under_tmp.exists()
    assert (ws / "inside.txt").read_text() == "ok"


def test_network_off_by_default(ws: Path) -> None:
    def target(path: Path) -> list[str]:
        with open("/proc/net/dev") as fh:
            return sorted(line.split(":")[0].strip() for line in fh.readlines()[2:])

    with BranchContext(target, ws) as ctx:
        assert ctx.wait(timeout=30) == ["lo"]


def test_abort_kills_setsid_and_nohup_descendants(ws: Path, no_leftover: str) -> None:
    marker = no_leftover

    def target(path: Path) -> None:
        subprocess.Popen(["setsid", "sleep", marker], start_new_session=True)
        subprocess.Popen(["sh", "-c", f"nohup sleep {marker} >/dev/null 2>&1 &"])
        (path / "started").write_text("yes")
        time.sleep(600)

    with BranchContext(target, ws) as ctx:
        deadline = time.monotonic() + 20
        while len(sleeping_with(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(sleeping_with(marker)) == 2
        ctx.abort()
        assert not ctx.alive
        with pytest.raises(ProcessBranchError, match="aborted"):
            ctx.wait()
    assert wait_until_gone(marker) == []


def test_finished_child_leaves_no_grandchildren(ws: Path, no_leftover: str) -> None:
    marker = no_leftover

    def target(path: Path) -> str:
        subprocess.Popen(["sh", "-c", f"nohup sleep {marker} >/dev/null 2>&1 &"]).wait()
        subprocess.Popen(["setsid", "-f", "sleep", marker]).wait()
        return "done"

    with BranchContext(target, ws) as ctx:
        assert ctx.wait(timeout=30) == "done"
    assert wait_until_gone(marker) == []


def test_timeout_kills_tree_and_raises(ws: Path, no_leftover: str) -> None:
    marker = no_leftover

    def target(path: Path) -> None:
        subprocess.Popen(["setsid", "sleep", marker], start_new_session=True)
        time.sleep(600)

    with BranchContext(target, ws) as ctx:
        with pytest.raises(TimeoutError):
            ctx.wait(timeout=0.5)
        assert not ctx.alive


def test_parent_sigkill_kills_sandbox(ws: Path, no_leftover: str, tmp_path: Path) -> None:
    """A caller killed with SIGKILL takes its sandboxes (and their trees) with it."""
    marker = no_leftover
    script = tmp_path / "parent.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "from branching_core.sandbox import BranchContext\n"
        "def t(p):\n"
        f"    subprocess.Popen(['setsid', 'sleep', '{marker}'], start_new_session=True)\n"
        "    time.sleep(600)\n"
        f"ctx = BranchContext(t, {str(ws)!r})\n"
        "print('started', flush=True)\n"
        "ctx.wait(timeout=600)\n"  # (a sandbox that failed says why on stderr)
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    errors = tmp_path / "stderr.txt"  # what went wrong in there, if the child never came
    with errors.open("w") as err:
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                                stderr=err, env=env, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 20
        while not processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert processes_with(marker), errors.read_text()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert wait_until_gone(marker) == []


def test_create_runs_many_and_cleans_up(ws: Path, tmp_path: Path) -> None:
    dirs = []
    for i in range(3):
        d = tmp_path / f"w{i}"
        d.mkdir()
        dirs.append(d)

    def make(i: int):  # closures are fine: the caller is forked, not pickled
        def target(path: Path) -> int:
            (path / "n").write_text(str(i))
            return i * i
        return target

    with BranchContext.create([make(i) for i in range(3)], dirs) as contexts:
        assert [c.wait(timeout=30) for c in contexts] == [0, 1, 4]
    assert [(d / "n").read_text() for d in dirs] == ["0", "1", "2"]


def test_view_path_of_a_helper_namespace(ws: Path, tmp_path: Path) -> None:
    """``/proc/<pid>/root/<inner>`` views: the sandbox sees them at the real inner path."""
    inner = tmp_path / "view"
    inner.mkdir()
    helper = start_view_helper(inner)
    try:
        view = Path(f"/proc/{helper.pid}/root{inner}")

        def target(path: Path) -> tuple[str, str]:
            (path / "made-in-sandbox").write_text("hi")
            return str(path), os.getcwd()

        with BranchContext(target, view) as ctx:
            assert ctx.wait(timeout=30) == (str(inner), str(inner))
        assert (view / "made-in-sandbox").read_text() == "hi"
        assert not (inner / "made-in-sandbox").exists()  # only in the helper's tmpfs
    finally:
        helper.kill()
        helper.wait()


def test_mount_at_shows_the_view_elsewhere(ws: Path, tmp_path: Path) -> None:
    shown = tmp_path / "project-root"
    shown.mkdir()
    (ws / "a.txt").write_text("from branch")

    def target(path: Path) -> tuple[str, str, str]:
        (path / "b.txt").write_text("new")
        return str(path), os.getcwd(), (path / "a.txt").read_text()

    with BranchContext(target, ws, mount_at=shown) as ctx:
        assert ctx.wait(timeout=30) == (str(shown), str(shown), "from branch")
    assert (ws / "b.txt").read_text() == "new"
    assert not (shown / "b.txt").exists()


def test_bad_workspace_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError):
        BranchContext(lambda p: None, tmp_path / "missing")
    with pytest.raises(WorkspaceError):
        BranchContext(lambda p: None, "/")
