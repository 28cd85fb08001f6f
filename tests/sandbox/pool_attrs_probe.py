"""Child of ``test_pool_attributes``: warm the executor pool, change one attribute of
this process, run one sandboxed command, print what the command saw as JSON.

``python -m tests.sandbox.pool_attrs_probe CASE WORKSPACE [CGROUP PREFIX]``; the pool is on or
off as ``FORKDECK_NATIVE_POOL`` says. Run in a child so the test process keeps its own
limits, affinity, priority, cgroup and uid.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

from branching_core import sandbox
from branching_core.sandbox import native, native_pool


def _warm(workspace: str) -> None:
    """Two commands, then wait until the pool holds its executors (pool on)."""
    for _ in range(2):
        assert sandbox.run_command("true", workspace).exit_code == 0
    if not native_pool.pool_enabled():
        return
    deadline = time.monotonic() + 30
    while len(native_pool.pool().idle_pids()) < native_pool.Pool.SIZE:
        assert time.monotonic() < deadline, "the pool never filled"
        time.sleep(0.01)


def _run(command: str, workspace: str) -> dict[str, object]:
    res = sandbox.run_command(command, workspace)
    return {"exit": res.exit_code, "out": res.stdout.strip(), "err": res.stderr.strip()}


def main() -> None:
    case, workspace = sys.argv[1], sys.argv[2]
    _warm(workspace)
    seen_before = native_pool.pool().spawned
    if case == "nofile":
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        out = _run("ulimit -n", workspace)
    elif case == "fsize":
        resource.setrlimit(resource.RLIMIT_FSIZE, (300 * 1024, 300 * 1024))
        out = _run("head -c 2000000 /dev/zero > big 2>/dev/null; wc -c < big; rm -f big",
                   workspace)
    elif case == "fsize-tiny":  # below one page: the sandbox's own writes must not care
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
        out = _run("echo hello; (head -c 5000 /dev/zero > f) 2>/dev/null; wc -c < f; rm f",
                   workspace)
    elif case == "affinity":
        os.sched_setaffinity(0, {0})
        out = _run("grep Cpus_allowed_list /proc/self/status", workspace)
    elif case == "nice":
        os.nice(7)
        out = _run("cut -d' ' -f19 /proc/self/stat", workspace)
    elif case == "cgroup":
        cgroup, prefix = sys.argv[3], sys.argv[4]  # prefix: "N:pids:" or "0::"
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
        out = _run(f"grep '^{prefix}' /proc/self/cgroup; "
                   "i=0; while [ $i -lt 30 ]; do sleep 1 & i=$((i+1)); done; wait; echo forked",
                   workspace)
        out["out"] = str(out["out"]).splitlines()[0]  # dash says "Cannot fork" on stderr
        out["err"] = "Cannot fork" in str(out["err"])
    elif case == "uid":
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
        out = _run("id -u; id -g", workspace)
    else:
        raise SystemExit(f"unknown case {case}")
    out["pool"] = native_pool.pool_enabled()
    out["warm"] = seen_before > 0
    out["fallbacks"] = native.fallbacks
    print(json.dumps(out))


if __name__ == "__main__":
    main()
