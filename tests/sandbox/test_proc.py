"""/proc inside the sandbox: nothing host-wide writable, the dangerous files masked
(issue 12, item 5), as container runtimes do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from branching_core.sandbox import run_command

# Every test runs against the native executor and the Python path (conftest.executor).
pytestmark = pytest.mark.usefixtures("executor")

SCAN = r'''
import json, os
own = {"self", "thread-self"} | {p for p in os.listdir("/proc") if p.isdigit()}
writable, masked = [], {}
for dirpath, dirnames, filenames in os.walk("/proc"):
    if dirpath == "/proc":
        dirnames[:] = [d for d in dirnames if d not in own]
    for name in filenames:
        path = os.path.join(dirpath, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # opened, never written
        except OSError:
            continue
        os.close(fd)
        writable.append(path)
for path in ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/scsi", "/proc/acpi",
             "/proc/latency_stats", "/proc/sched_debug", "/proc/asound"):
    if os.path.isdir(path):
        masked[path] = os.listdir(path)
    elif os.path.exists(path):
        with open(path, "rb") as fh:
            masked[path] = fh.read(64).decode("latin-1")
with open("/proc/cpuinfo") as fh:
    cpuinfo = len(fh.read()) > 0
print(json.dumps({"writable": writable, "masked": masked, "cpuinfo": cpuinfo}))
'''


def test_no_host_wide_proc_file_is_writable(ws: Path) -> None:
    ran = run_command(["/usr/bin/python3", "-c", SCAN], ws)
    assert ran.exit_code == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["writable"] == [], out["writable"]
    for path, content in out["masked"].items():
        assert content in ("", []), f"{path} is not masked: {content!r}"
    assert out["cpuinfo"], "ordinary /proc files stay readable"


def test_own_processes_stay_writable(ws: Path) -> None:
    """The branch still controls its own processes (oom_score_adj, comm)."""
    ran = run_command("echo 500 > /proc/self/oom_score_adj && echo renamed > /proc/self/comm"
                      " && cat /proc/self/oom_score_adj", ws)
    assert ran.exit_code == 0 and ran.stdout == "500\n", ran.stderr
