"""The socket-hiding stages are covered, not unmounted (issue 29, sandbox start).

A root caller's sandbox shows each host mount's directories through one overlay stage
per mount (``steps._compile_shared``). Unmounting those stages at the end of the setup
was the costliest step of a sandbox start (the first unmount in a namespace copied from
the view helper's waits for an RCU grace period: 0.4-5 ms). The stages' holder is now
moved over the old ``/proc`` and covered by the new one. These tests hold that: no
unmount on the way, and nothing of the stages (an overlay of the whole host root, masks
not applied) is reachable from inside, for both executors.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from branching_core.sandbox import BranchContext, run_command
from branching_core.sandbox.namespaces import plan_sandbox
from branching_core.sandbox.steps import _STAGE_HOLDER

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="stages are the root caller's shape (no user namespace)")

PROBE = r'''
import json, os, errno
out = {"dev": sorted(n for n in os.listdir("/dev") if n.startswith(".forkdeck")),
       "proc_entries": [n for n in ("0", "1x") if os.path.lexists("/proc/" + n)]}
rows = [line.split() for line in open("/proc/self/mountinfo")]
by_id = {r[0]: r for r in rows}
# the topmost mount on /proc (the last one listed there) is the new proc, and it sits
# on the holder: the holder (and its stages) are under it
procs = [r for r in rows if r[4] == "/proc"]
top = procs[-1]
out["top_proc"] = [top[top.index("-") + 1], by_id[top[1]][by_id[top[1]].index("-") + 1]]
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
out["umount_proc"] = (libc.umount2(b"/proc", 2), ctypes.get_errno())
print(json.dumps(out))
'''


def test_a_root_sandbox_start_unmounts_nothing(ws: Path) -> None:
    plan = plan_sandbox(ws, network=False, mount_at=None)
    try:
        ops = [step.op for step in plan.steps]
        stages = [step for step in plan.steps
                  if step.op == "overlay" and str(step.args[0]).startswith(_STAGE_HOLDER + "/")]
    finally:
        plan.close_fds()
    if not stages:
        pytest.skip("no host mount holds socket directories here: no stage is made")
    assert "umount" not in ops
    # the holder goes over /proc before the new /proc is mounted on top of it
    moves = [i for i, step in enumerate(plan.steps)
             if step.op == "mount" and step.args[:2] == (_STAGE_HOLDER, "/proc")]
    proc = [i for i, step in enumerate(plan.steps)
            if step.op == "mount" and step.args[:3] == ("proc", "/proc", "proc")]
    assert len(moves) == 1 and len(proc) == 1 and moves[0] < proc[0]


@pytest.mark.usefixtures("executor")
def test_stages_unreachable_from_a_command(ws: Path) -> None:
    ran = run_command(["/usr/bin/python3", "-c", PROBE], ws)
    assert ran.exit_code == 0, ran.stderr
    _assert_unreachable(json.loads(ran.stdout))


def test_stages_unreachable_from_a_callable(ws: Path) -> None:
    def probe(path: Path) -> dict[str, object]:
        scope: dict[str, object] = {}
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(PROBE, scope)  # our own probe, run inside the sandbox
        return json.loads(buf.getvalue())

    with BranchContext(probe, ws) as ctx:
        _assert_unreachable(ctx.wait(60))


def _assert_unreachable(out: dict[str, object]) -> None:
    assert out["dev"] == [], out  # neither the holder nor a stage is left in /dev
    assert out["proc_entries"] == [], out  # /proc is the new one: no stage shows there
    assert out["top_proc"] == ["proc", "tmpfs"], out  # the new /proc covers the holder
    code, err = out["umount_proc"]  # type: ignore[misc]
    assert code == -1 and err == 1, out  # EPERM: no capability to uncover it
