"""Reliability trials for the workspace engine: random Ctrl-C during real commits.

Run: ``python benchmarks/reliability.py [--trials 60] [--files 240] [--backends overlay,copy]``.

For each backend, ``--trials`` children each edit a branch (a third of ``--files``
modified, a sixth deleted, a third new) and leave ``with ws.branch(...)``, which
commits; SIGINT is sent at a random instant spread over 1.5x the measured commit time.
Every parent must end exactly before or exactly after the commit, both as the child
left it and after the next open; nothing may be left in the store or the project.
Prints one line per backend and exits 1 if any trial ended partial or left something.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branching_core.workspace.backends import BACKENDS
from tests.workspace.interrupt_trial import (
    commit_seconds,
    expected_states,
    run_trial,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--files", type=int, default=240)
    parser.add_argument("--backends", default="overlay,copy")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    failed = False
    print(f"random Ctrl-C during `with ws.branch(...)` commits ({args.trials} trials/backend)")
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory(prefix="forkdeck-reliability-") as tmp:
            base = Path(tmp)
            os.environ["FORKDECK_STORE"] = str(base / "_stores")
            probe = base / "probe"
            probe.mkdir()
            reason = BACKENDS[backend].probe(probe, base / "_stores" / "probe")
            if reason:
                print(f"{backend:8} skipped: {reason}")
                continue
            rng = random.Random(args.seed)
            states = expected_states(base, args.files)
            commit_s = commit_seconds(base, backend, args.files)
            counts = {"before": 0, "after": 0, "partial": 0}
            reopened_partial = leftovers = interrupted = 0
            for _ in range(args.trials):
                result = run_trial(base, backend, args.files, commit_s * 1.5, rng, states)
                counts[result.as_left] += 1
                reopened_partial += result.after_reopen == "partial"
                leftovers += bool(result.leftovers)
                interrupted += result.interrupted
            failed |= bool(counts["partial"] or reopened_partial or leftovers)
            print(
                f"{backend:8} commit {commit_s * 1000:6.1f} ms  before {counts['before']:3}  "
                f"after {counts['after']:3}  partial {counts['partial']:3}  "
                f"partial after reopen {reopened_partial:3}  left something {leftovers:3}  "
                f"(KeyboardInterrupt raised in {interrupted})"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
