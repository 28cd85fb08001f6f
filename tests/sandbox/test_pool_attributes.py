"""A pre-started executor runs a command with its caller's attributes at request time.

The pool's executors inherit their rlimits, cgroup, credentials, affinity and nice value
when they are started; a caller that changed one since must not see the old one in its
commands (``setrlimit(NOFILE, 64)`` gave commands 20,000; a caller in a cgroup capped at
12 pids had its commands run outside it; a caller that dropped to an unprivileged uid got
``NamespaceError``). Each case runs in a child (``pool_attrs_probe``) with the pool on,
after it filled, and with it off: both must give the answer the kernel gives a freshly
spawned process. Below a one-page ``RLIMIT_FSIZE`` every command failed with "File too
large" (the request went through a memfd, which the limit covers); the sandbox's own
writes are not the command's and the limit applies to the command only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.sandbox import sandbox_available
from branching_core.sandbox.native import binary

REPO = Path(__file__).resolve().parents[2]
PIDS_CAP = 12

pytestmark = [
    pytest.mark.skipif(not sandbox_available()[0], reason="sandbox unavailable here"),
    pytest.mark.skipif(not os.access(binary(), os.X_OK),
                       reason="native executor not built (the pool needs it)"),
]


def _probe(case: str, workspace: Path, pool: bool, *extra: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FORKDECK_NATIVE_POOL": "1" if pool else "0"}
    env.pop("FORKDECK_NATIVE", None)
    run = subprocess.run(
        [sys.executable, "-m", "tests.sandbox.pool_attrs_probe", case, str(workspace), *extra],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert run.returncode == 0, run.stderr
    out: dict[str, object] = json.loads(run.stdout.splitlines()[-1])
    assert out.pop("pool") is pool
    assert out.pop("warm") is pool, "the pool had not started executors before the change"
    assert out.pop("fallbacks") == 0, "a command took the Python path"
    return out


@pytest.fixture
def open_ws() -> Iterator[Path]:
    """A workspace any uid may use (the uid case drops to 65534)."""
    base = Path(tempfile.mkdtemp(prefix="forkdeck-poolattrs-"))
    base.chmod(0o777)
    try:
        yield base
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "no-pool"])
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("nofile", {"exit": 0, "out": "64", "err": ""}),
        ("fsize", {"exit": 0, "out": str(300 * 1024), "err": ""}),
        ("fsize-tiny", {"exit": 0, "out": "hello\n1000", "err": "File size limit exceeded"}),
        ("nice", {"exit": 0, "out": "7", "err": ""}),
    ],
)
def test_a_command_gets_the_callers_limits_and_priority_now(
    open_ws: Path, case: str, expected: dict[str, object], pool: bool
) -> None:
    assert _probe(case, open_ws, pool) == expected


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin to one")
@pytest.mark.parametrize("pool", [True, False], ids=["pool", "no-pool"])
def test_a_command_gets_the_callers_cpu_affinity_now(open_ws: Path, pool: bool) -> None:
    out = _probe("affinity", open_ws, pool)
    assert out == {"exit": 0, "out": "Cpus_allowed_list:\t0", "err": ""}


def _pids_hierarchy() -> tuple[Path, str] | None:
    """Where a pids cgroup can be made, and how /proc/self/cgroup names that hierarchy:
    a cgroup v1 ``pids`` mount ("N:pids:"), or cgroup v2 with the pids controller
    ("0::")."""
    with open("/proc/self/mounts") as fh:
        mounts = [line.split() for line in fh]
    for _dev, where, kind, options, *_ in mounts:
        if kind == "cgroup" and "pids" in options.split(","):
            index = next(line.split(":")[0] for line in
                         Path("/proc/self/cgroup").read_text().splitlines() if ":pids:" in line)
            return Path(where), f"{index}:pids:"
    for _dev, where, kind, *_ in mounts:
        if kind == "cgroup2" and "pids" in (Path(where) / "cgroup.controllers").read_text().split():
            control = Path(where) / "cgroup.subtree_control"
            if "pids" not in control.read_text().split():
                try:
                    control.write_text("+pids")
                except OSError:
                    continue
            return Path(where), "0::"
    return None


@pytest.fixture
def capped_cgroup() -> Iterator[tuple[Path, str]]:
    """A real pids cgroup capped at PIDS_CAP tasks, and its line in /proc/self/cgroup."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a cgroup and move a process into it")
    found = _pids_hierarchy()
    if found is None:
        pytest.skip("no cgroup pids hierarchy (v1 pids or v2 with the pids controller) here")
    root, prefix = found
    group = root / f"forkdeck-pooltest-{os.getpid()}"
    group.mkdir()
    (group / "pids.max").write_text(str(PIDS_CAP))
    try:
        yield group, f"{prefix}/{group.name}"
    finally:
        for _ in range(100):  # its tasks are gone once the probe (and its sleeps) ended
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "no-pool"])
def test_a_command_runs_in_the_cgroup_its_caller_joined(
    open_ws: Path, capped_cgroup: tuple[Path, str], pool: bool
) -> None:
    group, line = capped_cgroup
    out = _probe("cgroup", open_ws, pool, str(group), line.split("/")[0])
    assert out["out"] == line
    assert out["err"] is True, "the command forked 30 tasks in a cgroup capped at 12"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to uid 65534")
@pytest.mark.parametrize("pool", [True, False], ids=["pool", "no-pool"])
def test_a_caller_that_dropped_to_an_unprivileged_uid_runs_as_it(
    open_ws: Path, pool: bool
) -> None:
    assert _probe("uid", open_ws, pool) == {"exit": 0, "out": "65534\n65534", "err": ""}
