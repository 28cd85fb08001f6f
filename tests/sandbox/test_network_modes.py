"""Network modes through both executors and the pre-started pool: a sandbox built for one
mode is never reused for another, and a normal user gets per-branch services (and a clear
word about /dev/net/tun)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.sandbox import native, run_command
from branching_core.sandbox.netstack import NetNamespace
from tests.sandbox.net_support import requires_stack
from tests.support.unprivileged import (
    assert_scenario_ok,
    chown_tree,
    make_world_readable_root,
    requires_unprivileged,
    run_as_nobody,
)

IFACES = "cat /proc/net/dev"


def interfaces(ws: Path, network: object) -> set[str]:
    res = run_command(IFACES, ws, network=network, timeout=30)  # type: ignore[arg-type]
    assert res.exit_code == 0, res.stderr
    return {line.split(":")[0].strip() for line in res.stdout.splitlines()[2:]}


@requires_stack
def test_modes_never_share_a_prebuilt_sandbox(ws: Path, executor: str) -> None:
    prebuilt = native.prebuilt_used
    host = interfaces(ws, "host")
    assert interfaces(ws, "none") == {"lo"}
    with NetNamespace() as ns:
        for _ in range(3):  # the same command again: the pool pre-builds its sandbox
            assert interfaces(ws, "none") == {"lo"}
        if executor == "native" and os.geteuid() == 0 and native.native_pool.pool_enabled():
            assert native.prebuilt_used > prebuilt  # a pre-built sandbox was in play
        joined = interfaces(ws, ns)
        assert joined != {"lo"} and "lo" in joined  # the stack's interface, not a fresh ns
        for _ in range(2):
            assert interfaces(ws, ns) == joined
        assert interfaces(ws, "none") == {"lo"}
        assert interfaces(ws, "host") == host
        assert interfaces(ws, ns) == joined
    native.drain_pool()


NOBODY_SCENARIO = r'''
import json, os, sys, urllib.request
from branching_core import Workspace
from branching_core.sandbox.branch_net import BranchNetwork
from branching_core.sandbox.netstack import NetworkUnavailable, find_stack
from branching_core.sandbox.services import ServiceSpec
out = {}
try:
    find_stack()
    out["stack"] = "ok"
except NetworkUnavailable as exc:
    out["stack"] = str(exc)
ws = Workspace(sys.argv[1])
spec = ServiceSpec("web", "exec python3 -m http.server 8000 --bind 127.0.0.1", port=8000,
                   ready="http", stop_timeout=3)
for name in ("a", "b"):
    branch = ws.branch(name, on_success=None)
    (branch.path / "who.txt").write_text(name)
    net = BranchNetwork.for_branch(branch, mode="none", services=[spec])
    net.start_service("web")
    res = net.run("python3 -c \"import urllib.request as u;"
                  "print(u.urlopen('http://localhost:8000/who.txt').read().decode())\"")
    with urllib.request.urlopen(net.forwards[8000].url + "/who.txt") as resp:
        out[name] = [res.exit_code, res.stdout.strip(), resp.read().decode()]
    branch.abort()
    out[name].append(net.closed)
out["fstype"] = ws.fstype
print(json.dumps(out))
'''


@pytest.fixture
def nobody_root() -> Iterator[Path]:
    root = make_world_readable_root()
    (root / "ws").mkdir()
    chown_tree(root / "ws")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@requires_unprivileged
def test_a_normal_user_gets_branch_services_and_a_clear_tun_message(nobody_root: Path
                                                                    ) -> None:
    proc = run_as_nobody(NOBODY_SCENARIO, root=nobody_root, args=[str(nobody_root / "ws")])
    out = json.loads(assert_scenario_ok(proc).strip().splitlines()[-1])
    assert out["a"] == [0, "a", "a", True] and out["b"] == [0, "b", "b", True], out
    tun_ok = os.stat("/dev/net/tun").st_mode & 0o006 == 0o006
    if shutil.which("pasta") is None and shutil.which("slirp4netns") is None:
        assert "apt install passt" in out["stack"]
    elif tun_ok:
        assert out["stack"] == "ok"
    else:
        assert "/dev/net/tun is mode" in out["stack"] and "chmod 0666" in out["stack"]


def _interfaces_here(path: Path) -> set[str]:
    with open("/proc/net/dev") as f:
        return {line.split(":")[0].strip() for line in f.read().splitlines()[2:]}


@requires_stack
def test_callables_take_the_same_modes(ws: Path) -> None:
    from branching_core.sandbox import BranchContext

    with BranchContext(_interfaces_here, ws, network="none") as ctx:
        assert ctx.wait(timeout=30) == {"lo"}
    with NetNamespace() as ns:
        with BranchContext(_interfaces_here, ws, network=ns) as ctx:
            joined = ctx.wait(timeout=30)
        assert "lo" in joined and len(joined) > 1
        with BranchContext(_interfaces_here, ws, network="private") as ctx:
            assert ctx.wait(timeout=30) == joined  # the same stack's interfaces, its own ns
