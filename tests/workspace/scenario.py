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


def main() -> None:
    mode, path, backend = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    ws = Workspace(path, backend=backend)
    if mode == "commit":
        branch = ws.branch("crashy")
        agent_edits(branch.path)
        print(json.dumps({"ops": len(branch.changes().all_paths)}), flush=True)
        branch.commit()
        print("committed", flush=True)
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
