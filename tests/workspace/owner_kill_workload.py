"""Child of ``test_nothing_outlives_its_owner``: a process using a workspace's backend
as a session does (branches of many files, sandboxed commands, aborts whose trash is
removed out of process), forever, until the test SIGKILLs it at a random instant."""

from __future__ import annotations

import sys
from pathlib import Path

from branching_core import Workspace
from branching_core.sandbox import run_command, sandbox_available


def main() -> None:
    root, backend = Path(sys.argv[1]), sys.argv[2]
    ws = Workspace(root, backend=backend)
    if sys.argv[3:] == ["big-trash"]:  # one abort whose trash takes rm a while
        branch = ws.branch("big")
        for d in range(40):
            (branch.path / f"d{d}").mkdir()
            for i in range(1000):
                (branch.path / f"d{d}" / f"f{i}").write_text("x")
        print("ready", flush=True)
        branch.abort()
        from branching_core.workspace import reaper

        reaper.drain(timeout=600)
        return
    sandboxed = sandbox_available()[0]
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        branch = ws.branch(f"b{n}")
        for i in range(400):
            (branch.path / f"f{i}.txt").write_text(str(i))
        if sandboxed:
            run_command("ls | wc -l >/dev/null; sleep 0.01", branch.path)
        branch.abort()


if __name__ == "__main__":
    main()
