"""Fork branches of the live coordinator each get their own localhost: a declared service
starts in each branch's namespace, the branch's ``run_command`` reaches its own at
``localhost:8000`` across turns, and the services are gone once the fork is merged."""

from __future__ import annotations

from pydantic_ai import Agent

from branching_core import BranchSpec, Workspace
from branching_core.fork import ForkCoordinator
from branching_core.sandbox.branch_net import live_networks
from branching_core.sandbox.net_settings import NetworkSetup
from branching_core.sandbox.services import ServiceSpec
from tests.fork.helpers import Scripted, Step, call, tool_results_after
from tests.sandbox.conftest import processes_with, wait_until_gone
from tests.sandbox.net_support import SERVER, requires_stack

pytestmark = [requires_stack]
MARKER = "forkdeck-fork-net-test"
LEFT_OPEN_MARKER = "forkdeck-fork-net-left-open"
FETCH = ("python3 -c \"import urllib.request;print('got', urllib.request.urlopen("
         "'http://localhost:8000/who.txt', timeout=10).read().decode().strip())\"")


def script(label: str) -> list[Step]:
    return [call("write_file", path="who.txt", content=f"{label}\n"),
            call("run_command", command=FETCH),
            call("run_command", command=FETCH)]


async def test_each_fork_branch_reaches_its_own_service(ws: Workspace) -> None:
    before = live_networks()  # (only this test's networks are looked at)
    (ws.path / "server.py").write_text(SERVER)
    web = ServiceSpec("web", f"exec python3 server.py {MARKER} 8000", port=8000, ready="http",
                      autostart=True, stop_timeout=3)
    scripted = Scripted({f"do {label}": script(label) for label in ("a", "b")})
    coord = ForkCoordinator(Agent(scripted.model), workspace=ws,
                            network=NetworkSetup(mode="private", services=(web,)))
    await coord.fork([BranchSpec(label, f"do {label}") for label in ("a", "b")],
                     parent_history=[])
    await coord.wait(timeout=60)
    assert len(processes_with(MARKER)) == 2  # one server per branch, both on port 8000
    for label in ("a", "b"):
        rt = coord.get_branch(label)
        results = [p.content for p in tool_results_after(rt.history, f"do {label}")
                   if p.tool_name == "run_command"]
        assert len(results) == 2 and all(f"got {label}" in str(r) for r in results), results
    ours = [n for n in live_networks() if n not in before]
    labels = sorted(n.forwards[8000].branch for n in ours)
    assert labels == ["a", "b"]  # shown as "a · web → http://127.0.0.1:PORT"
    await coord.merge_or_select("pick:a")
    assert wait_until_gone(MARKER) == []
    assert [n for n in live_networks() if n not in before] == []
    assert (ws.path / "who.txt").read_text() == "a\n"


async def test_a_fork_left_open_releases_its_services_and_keeps_its_files(ws: Workspace) -> None:
    """A front end that leaves the fork open for recovery (the TUI at quit) ends every
    branch's service, forward and namespace, and the branches' files stay mergeable."""
    before = live_networks()
    (ws.path / "server.py").write_text(SERVER)
    web = ServiceSpec("web", f"exec python3 server.py {LEFT_OPEN_MARKER} 8000", port=8000,
                      ready="http", autostart=True, stop_timeout=3)
    scripted = Scripted({f"do {label}": script(label) for label in ("a", "b")})
    coord = ForkCoordinator(Agent(scripted.model), workspace=ws,
                            network=NetworkSetup(mode="private", services=(web,)))
    await coord.fork([BranchSpec(label, f"do {label}") for label in ("a", "b")],
                     parent_history=[])
    await coord.wait(timeout=60)
    assert len(processes_with(LEFT_OPEN_MARKER)) == 2
    await coord.release_networks()
    assert wait_until_gone(LEFT_OPEN_MARKER) == []
    assert [n for n in live_networks() if n not in before] == []
    assert not coord.is_resolved
    await coord.merge_or_select("pick:b")
    assert (ws.path / "who.txt").read_text() == "b\n"
    assert [n for n in live_networks() if n not in before] == []
