"""What the one landing rule (``workspace.guard.check_landing``) costs a commit.

Usage: ``python benchmarks/landing_rule.py [FILES] [ROUNDS]`` (default 2000 files, 5
rounds). For each backend, a branch rewrites FILES files spread over 350 directories and
commits; printed per backend: the median whole commit, the median time of the landing
rule's own checks (path syntax, symlink walk, special files, privilege stripping) and of
the conflict check it ends with (which existed before the rule). Timings wrap the real
functions in place; nothing is simulated.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import branching_core.workspace.branch as branch_mod
import branching_core.workspace.guard as guard_mod
from branching_core.workspace import Workspace


def main(files: int, rounds: int) -> None:
    whole: list[float] = []
    rule: list[float] = []
    conflicts: list[float] = []
    check, refuse = branch_mod.check_landing, guard_mod.refuse_unapplicable

    def timed_check(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return check(*args, **kwargs)
        finally:
            rule.append(time.perf_counter() - start)

    def timed_refuse(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return refuse(*args, **kwargs)
        finally:
            conflicts.append(time.perf_counter() - start)

    branch_mod.check_landing = timed_check
    guard_mod.refuse_unapplicable = timed_refuse
    for backend in ("overlay", "copy"):
        whole.clear(), rule.clear(), conflicts.clear()
        for _ in range(rounds):
            base = Path(tempfile.mkdtemp(prefix="forkdeck-landing-bench-"))
            root = base / "ws"
            rels = [f"d{i % 50}/e{i % 7}/f{i}.txt" for i in range(files)]
            for rel in rels:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text("x\n")
            ws = Workspace(root, backend=backend)
            branch = ws.branch("b", on_success=None)
            for rel in rels:
                (Path(branch.path) / rel).write_text("y\n")
            start = time.perf_counter()
            branch.commit()
            whole.append(time.perf_counter() - start)
            ws.close()
            shutil.rmtree(base, ignore_errors=True)
        own = [r - c for r, c in zip(rule, conflicts, strict=True)]
        print(
            f"{backend:8} commit {statistics.median(whole) * 1000:7.1f} ms   "
            f"landing rule {statistics.median(own) * 1000:6.1f} ms   "
            f"conflict check {statistics.median(conflicts) * 1000:6.1f} ms   "
            f"({files} files, {rounds} rounds)"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000, int(sys.argv[2]) if len(sys.argv) > 2 else 5)
