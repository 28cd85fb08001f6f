"""Child-process scenarios for the crash and lifecycle tests (run with ``python -m``)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from branching_core import Workspace


def agent_edits(view: Path) -> None:
    """A commit with every kind of operation: delete, replace, mkdir, put, chmod."""
    (view / "a.txt").write_text("a changed\n")
    (view / "new.txt").write_text("new\n")
    (view / "sub" / "b.txt").unlink()
    (view / "fresh" / "deep").mkdir(parents=True)
    (view / "fresh" / "deep" / "f.txt").write_text("f\n")
    shutil.rmtree(view / "gone")
    (view / "gone").write_text("was a directory\n")
    os.chmod(view / "sub", 0o700)
    (view / "c.txt").write_text("c changed\n")


def seed_many(root: Path, files: int) -> None:
    """A parent for the interrupt trials: ``files`` small files in a few directories."""
    for i in range(files):
        d = root / f"d{i % 8}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text(f"file {i}\n")


def many_edits(view: Path, files: int) -> None:
    """Modify a third, delete a sixth, add as many new files: a commit of many renames."""
    for i in range(0, files, 3):
        (view / f"d{i % 8}" / f"f{i}.txt").write_text(f"changed {i}\n")
    for i in range(1, files, 6):
        (view / f"d{i % 8}" / f"f{i}.txt").unlink()
    (view / "new").mkdir()
    for i in range(files // 3):
        (view / f"d{i % 8}" / f"n{i}.txt").write_text(f"new {i}\n")


def fork_lock_holder() -> int:
    """Fork a child that shares this process's open files, the store session's flock
    included, and sleeps with them: what a ``find`` or ``rm`` child is between its
    ``fork`` and its ``exec``, here for as long as a test needs (it kills the child).
    Returns once the child has let go of stdout and stderr (the test reads them to EOF)."""
    import time

    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: stdio to /dev/null, everything else kept
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.write(ready_w, b"1")
        time.sleep(120)
        os._exit(0)
    os.close(ready_w)
    os.read(ready_r, 1)
    os.close(ready_r)
    return pid


def main() -> None:
    mode, path, backend = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    ws = Workspace(path, backend=backend)
    if mode == "commit":
        branch = ws.branch("crashy")
        agent_edits(branch.path)
        print(json.dumps({"ops": len(branch.changes().all_paths)}), flush=True)
        branch.commit()
        print("committed", flush=True)
    elif mode == "commit-forked":
        # killed at a step of the commit (FORKDECK_CRASH_AT) while a forked child still
        # shares the session's lock (tests/workspace/test_state_dir_kills.py)
        branch = ws.branch("crashy")
        agent_edits(branch.path)
        print(json.dumps({"holder": fork_lock_holder()}), flush=True)
        branch.commit()
    elif mode == "interrupted":
        # with ws.branch(...) committing many edits; the parent sends SIGINT at a random
        # instant after "ready" (see tests/workspace/interrupt_trial.py)
        files = int(sys.argv[4])
        import time

        with ws.branch("ctrl-c") as branch:
            many_edits(branch.path, files)
            print("ready", flush=True)
            started = time.perf_counter()
        print(json.dumps({"commit_s": time.perf_counter() - started}), flush=True)
    elif mode == "nested-abort":
        # a branch that a child committed into (so it has a generation) is aborted;
        # FORKDECK_CRASH_AT=dropping-generation kills the process half way
        outer = ws.branch("outer")
        with outer.branch("inner") as inner:
            (inner.path / "inner.txt").write_text("inner\n")
        outer.abort()
        print("aborted", flush=True)
    elif mode == "leave-open":
        plain = ws.branch("plain")
        (plain.path / "plain.txt").write_text("plain")
        durable = ws.branch("keeper", durable=True)
        (durable.path / "kept.txt").write_text("kept")
        from branching_core.workspace.mount_helper import shared_helper

        print(json.dumps({"durable": durable.id, "helper": shared_helper().pid}), flush=True)
        if len(sys.argv) > 4 and sys.argv[4] == "hang":
            sys.stdin.read()  # wait to be killed


if __name__ == "__main__":
    main()
