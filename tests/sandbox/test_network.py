"""Every branch its own localhost: real namespaces, real pasta/slirp4netns, real servers.

Three branches serve the same port with different content; a service lives across its
branch's commands and is gone with the branch (abort, commit, SIGKILL of the owner);
``private`` reaches the host's loopback through the stack's gateway while another
branch's ports stay out of reach.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core import Workspace
from branching_core.sandbox import run_command
from branching_core.sandbox.branch_net import BranchNetwork, live_networks, ports_records
from branching_core.sandbox.netstack import NetNamespace, NetworkUnavailable, find_stack
from branching_core.sandbox.network import NetworkPolicy
from branching_core.sandbox.services import ServiceError, ServiceSpec
from tests.sandbox.conftest import processes_with, wait_until_gone
from tests.sandbox.net_support import (
    GATEWAY_CLIENT,
    SERVER,
    alive,
    pids_in_netns,
    port_refuses,
    requires_stack,
    serve_on_host_loopback,
    wait_for,
)

pytestmark = [requires_stack]

CLIENT = ("python3 -c \"import urllib.request,sys;"
          "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode().strip())\" ")


@pytest.fixture
def workspace(ws: Path) -> Iterator[Workspace]:
    (ws / "server.py").write_text(SERVER)
    yield Workspace(ws)
    for net in live_networks():
        net.close()


def web(marker: str, port: int = 8000) -> ServiceSpec:
    return ServiceSpec("web", f"exec python3 server.py {marker} {port}", port=port,
                       ready="http", stop_timeout=3)


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode().strip()


def test_three_branches_serve_the_same_port(workspace: Workspace, no_leftover: str) -> None:
    nets = []
    branches = [workspace.branch(name, on_success=None) for name in "abc"]
    for branch in branches:
        (branch.path / "who.txt").write_text(f"branch {branch.name}\n")
        net = BranchNetwork.for_branch(branch, services=[web(no_leftover)])
        net.start_service("web")  # no EADDRINUSE: each binds 8000 in its own namespace
        nets.append(net)
    for branch, net in zip(branches, nets, strict=True):
        own = net.run(CLIENT + "http://localhost:8000/who.txt", timeout=30)
        assert own.exit_code == 0, own.stderr
        assert own.stdout.strip() == f"branch {branch.name}"
        fwd = net.forwards[8000]
        assert fwd.label() == f"{branch.name} · web → http://127.0.0.1:{fwd.host_port}"
        assert get(fwd.url + "/who.txt") == f"branch {branch.name}"
    listed = {(r.branch, r.host_port) for r in ports_records(workspace.path)}
    assert listed == {(n.label, n.forwards[8000].host_port) for n in nets}
    for branch in branches:
        branch.abort()
    assert ports_records(workspace.path) == []


@pytest.mark.parametrize("end", ["abort", "commit"])
def test_service_lives_across_commands_and_dies_with_the_branch(
    workspace: Workspace, no_leftover: str, end: str
) -> None:
    branch = workspace.branch("b", on_success=None)
    net = BranchNetwork.for_branch(branch, services=[web(no_leftover)])
    service = net.start_service("web")
    server_pid = processes_with(no_leftover)
    assert len(server_pid) == 1
    for i in range(3):
        (branch.path / "n.txt").write_text(f"{i}\n")
        res = net.run(CLIENT + "http://127.0.0.1:8000/n.txt", timeout=30)
        assert (res.exit_code, res.stdout.strip()) == (0, str(i))
    assert processes_with(no_leftover) == server_pid  # the same server all along
    assert service.alive
    ns = net.namespace
    assert ns is not None
    inode, holder, host_port = ns.inode(), ns.pid, net.forwards[8000].host_port
    assert inode is not None and pids_in_netns(inode)
    (branch.path / "made.txt").write_text("kept\n")
    branch.commit() if end == "commit" else branch.abort()
    assert net.closed and not service.alive
    assert wait_until_gone(no_leftover) == []
    assert wait_for(lambda: pids_in_netns(inode) == [])
    assert not alive(holder)
    assert port_refuses(host_port)
    assert (workspace.path / "made.txt").exists() == (end == "commit")


OWNER = r'''
import json, sys
from branching_core import Workspace
from branching_core.sandbox.branch_net import BranchNetwork
from branching_core.sandbox.services import ServiceSpec
ws = Workspace(sys.argv[1])
branch = ws.branch("owned", on_success=None, durable=True)
spec = ServiceSpec("web", f"exec python3 server.py {sys.argv[2]} 8000", port=8000, ready="http")
net = BranchNetwork.for_branch(branch, services=[spec])
net.start_service("web")
stack = [p for p in open(f"/proc/{net.namespace.pid}/task/{net.namespace.pid}/children")
         .read().split()]
print(json.dumps({"inode": net.namespace.inode(), "holder": net.namespace.pid,
                  "stack": [int(p) for p in stack], "port": net.forwards[8000].host_port}),
      flush=True)
sys.stdin.read()
'''


@pytest.mark.parametrize("end", ["sigkill", "exit"])
def test_everything_of_a_branch_network_dies_with_its_owner(
    workspace: Workspace, no_leftover: str, tmp_path: Path, end: str
) -> None:
    script = tmp_path / "owner.py"
    script.write_text(OWNER)
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    owner = subprocess.Popen([sys.executable, str(script), str(workspace.path), no_leftover],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=workspace.path, env=env)
    try:
        assert owner.stdout is not None
        info = json.loads(owner.stdout.readline())
        assert get(f"http://127.0.0.1:{info['port']}/server.py").startswith("import")
        assert processes_with(no_leftover) and info["stack"]
        if end == "sigkill":
            owner.send_signal(signal.SIGKILL)
        else:  # forkdeck exits: the branch network closes at exit
            assert owner.stdin is not None
            owner.stdin.close()
        owner.wait(20)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
    assert wait_until_gone(no_leftover) == []
    assert wait_for(lambda: pids_in_netns(info["inode"]) == [])
    assert wait_for(lambda: not alive(info["holder"]))
    assert all(wait_for(lambda p=p: not alive(p)) for p in info["stack"])
    assert port_refuses(info["port"])
    assert ports_records(workspace.path) == []


@pytest.fixture
def host_server(tmp_path: Path) -> Iterator[int]:
    with serve_on_host_loopback(tmp_path) as port:
        yield port


@pytest.mark.usefixtures("executor")
def test_private_reaches_the_host_loopback_through_the_gateway(ws: Path, host_server: int
                                                               ) -> None:
    with NetNamespace() as ns:
        assert ns.gateway not in ("127.0.0.1", "")
        res = run_command(CLIENT + f"http://{ns.gateway}:{host_server}/hello.txt", ws,
                          network=ns, timeout=30)
        assert (res.exit_code, res.stdout.strip()) == (0, "from the host"), res.stderr
        # its own loopback is its own: the host's server is not at 127.0.0.1 inside
        mine = run_command(CLIENT + f"http://127.0.0.1:{host_server}/hello.txt", ws,
                           network=ns, timeout=30)
        assert mine.exit_code != 0
    # a one-off private sandbox makes (and ends) a namespace of its own, whose default
    # gateway is the host's loopback (pasta and slirp4netns alike)
    one = run_command(["python3", "-c", GATEWAY_CLIENT, str(host_server)], ws,
                      network="private", timeout=30)
    assert (one.exit_code, one.stdout.strip()) == (0, "from the host"), one.stderr
    none = run_command(CLIENT + f"http://127.0.0.1:{host_server}/hello.txt", ws,
                       network="none", timeout=30)
    assert none.exit_code != 0


def test_a_branch_cannot_reach_another_branchs_port(workspace: Workspace,
                                                    no_leftover: str) -> None:
    a = workspace.branch("a", on_success=None)
    b = workspace.branch("b", on_success=None)
    net_a = BranchNetwork.for_branch(a, services=[web(no_leftover, 8123)])
    net_b = BranchNetwork.for_branch(b)
    net_a.start_service("web")
    assert net_a.run(CLIENT + "http://127.0.0.1:8123/server.py", timeout=30).exit_code == 0
    other = net_b.run(CLIENT + "http://127.0.0.1:8123/server.py", timeout=30)
    assert other.exit_code != 0 and "refused" in other.stderr.lower()
    assert net_b.namespace is not None
    sock = net_b.namespace.socket()
    with sock, pytest.raises(ConnectionRefusedError):
        sock.connect(("127.0.0.1", 8123))
    a.abort()
    b.abort()


def test_unknown_or_failing_service_says_why(workspace: Workspace) -> None:
    branch = workspace.branch("x", on_success=None)
    net = BranchNetwork.for_branch(branch, mode="none", services=[
        ServiceSpec("dies", "echo broken config >&2; exit 3", port=9000, stop_timeout=1)])
    with pytest.raises(ServiceError, match=r"unknown service 'nope'.*dies"):
        net.start_service("nope")
    with pytest.raises(ServiceError, match=r"(?s)exited with code 3.*broken config"):
        net.start_service("dies")
    branch.abort()


def test_missing_stack_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(NetworkUnavailable, match=r"apt install passt.*apt install slirp4netns"):
        find_stack()
    with pytest.raises(NetworkUnavailable, match=r"apt install slirp4netns"):
        find_stack("slirp4netns")


def test_fallback_happens_only_when_allowed(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no stack to be found
    with pytest.raises(NetworkUnavailable, match="apt install passt"):
        BranchNetwork(ws, label="strict", mode="private")
    with BranchNetwork(ws, label="none", mode="private",
                       policy=NetworkPolicy(fallback="none")) as net:
        assert net.namespace is not None and net.namespace.stack_name == "loopback"
    with BranchNetwork(ws, label="host", mode="private",
                       policy=NetworkPolicy(fallback="host")) as net:
        assert net.mode == "host" and net.namespace is None
    assert live_networks() == []


def test_forward_relays_many_connections(workspace: Workspace, no_leftover: str) -> None:
    branch = workspace.branch("m", on_success=None)
    net = BranchNetwork.for_branch(branch, mode="none", services=[web(no_leftover)])
    net.start_service("web")
    url = net.forwards[8000].url
    payload = "x" * 300_000
    (branch.path / "big.txt").write_text(payload)
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(get(url + "/big.txt")))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [payload] * 6
    branch.abort()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=2)


@pytest.mark.parametrize("stack", ["pasta", "slirp4netns"])
def test_each_stack_gives_outbound_access(ws: Path, host_server: int, stack: str) -> None:
    try:
        find_stack(stack)
    except NetworkUnavailable as exc:
        pytest.skip(f"user-mode network stack unavailable: {exc}")
    with NetNamespace(stack=stack) as ns:
        assert ns.stack_name == stack
        res = run_command(["python3", "-c", GATEWAY_CLIENT, str(host_server)], ws,
                          network=ns, timeout=30)
        assert (res.exit_code, res.stdout.strip()) == (0, "from the host"), res.stderr
        holder = ns.pid
    assert wait_for(lambda: not alive(holder))


def test_a_server_on_the_ipv6_loopback_only_is_forwarded_too(workspace: Workspace,
                                                              no_leftover: str) -> None:
    if not socket.has_ipv6 or not os.path.exists("/proc/net/if_inet6"):
        pytest.skip("no IPv6 on this machine")
    branch = workspace.branch("v6", on_success=None)
    (branch.path / "v6.py").write_text(
        "import http.server, socket, sys\n"
        "class S(http.server.ThreadingHTTPServer):\n    address_family = socket.AF_INET6\n"
        "S(('::1', 8000), http.server.SimpleHTTPRequestHandler).serve_forever()\n")
    spec = ServiceSpec("web6", f"exec python3 v6.py {no_leftover}", port=8000, ready="http")
    net = BranchNetwork.for_branch(branch, mode="none", services=[spec])
    net.start_service("web6")
    assert get(net.forwards[8000].url + "/v6.py").startswith("import http.server")
    branch.abort()


def test_a_network_made_for_a_closed_branch_closes_at_once(workspace: Workspace) -> None:
    branch = workspace.branch("late", on_success=None)
    branch.abort()  # e.g. a fork branch terminated while its network was being made
    net = BranchNetwork.for_branch(branch, mode="none")
    assert net.closed and live_networks() == []
