"""``--network``, ``--service``, ``forkdeck ports`` and forwards in ``status``, end to end
(real processes, real namespaces, a real server declared in config.toml)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.cli import main
from tests.sandbox.net_support import (
    GATEWAY_CLIENT,
    SERVER,
    port_refuses,
    requires_stack,
    serve_on_host_loopback,
    wait_for,
)

pytestmark = [requires_stack]
REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "branching_core.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture
def host_server(tmp_path: Path) -> Iterator[int]:
    with serve_on_host_loopback(tmp_path) as port:
        yield port


@pytest.fixture
def project(tmp_path: Path) -> Path:
    ws = tmp_path / "proj"
    (ws / ".pydantic-deep").mkdir(parents=True)
    (ws / "server.py").write_text(SERVER)
    (ws / "index.txt").write_text("served from the branch\n")
    (ws / ".pydantic-deep" / "config.toml").write_text(
        '[services.web]\ncommand = "exec python3 server.py forkdeck-cli-test 8000"\n'
        'port = 8000\nready = "http"\nstop_timeout = 3\n')
    return ws


FETCH = ("python3 -c \"import urllib.request;print(urllib.request.urlopen("
         "'http://localhost:8000/index.txt', timeout=10).read().decode().strip())\"")


def test_run_with_a_service_sees_it_at_localhost(project: Path) -> None:
    res = cli("run", "-w", str(project), "--service", "web", "--", "sh", "-c", FETCH,
              cwd=project)
    assert res.returncode == 0, res.stderr
    assert "served from the branch" in res.stdout
    assert " · web → http://127.0.0.1:" in res.stderr


def test_bad_network_and_unknown_service_are_one_line_errors(project: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    before = sorted(p.name for p in project.iterdir())
    assert main(["run", "-w", str(project), "--network", "wifi", "--", "true"]) == 2
    assert main(["run", "-w", str(project), "--service", "nope", "--", "true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "invalid choice: 'wifi'" in err[0]
    assert err[1].endswith("unknown service 'nope' (declared: web)")
    assert sorted(p.name for p in project.iterdir()) == before


def test_pattern_candidates_take_the_network_option(project: Path, host_server: int) -> None:
    (project / "client.py").write_text(GATEWAY_CLIENT)
    fetch = f"python3 client.py {host_server} > got.txt"
    none = cli("speculate", "-w", str(project), "--network", "none", "--json", "-c", fetch,
               cwd=project)
    assert json.loads(none.stdout)["committed"] is False
    assert not (project / "got.txt").exists()
    private = cli("speculate", "-w", str(project), "--network", "private", "--json",
                  "-c", fetch, cwd=project)
    assert json.loads(private.stdout)["committed"] is True, private.stderr
    assert (project / "got.txt").read_text().strip() == "from the host"


def test_ports_lists_forwards_of_a_running_branch_and_drops_them_after(project: Path) -> None:
    wait = "python3 -c 'import time; time.sleep(60)'"
    run = subprocess.Popen([sys.executable, "-m", "branching_core.cli", "run", "-w", str(project),
                            "--service", "web", "--", "sh", "-c", wait], cwd=project,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        forwards: list[dict[str, object]] = []

        def listed() -> bool:
            nonlocal forwards
            out = cli("ports", "-w", str(project), "--json", cwd=project)
            forwards = json.loads(out.stdout)["forwards"]
            return bool(forwards)

        assert wait_for(listed, timeout=60)
        (fwd,) = forwards
        assert fwd["service"] == "web" and fwd["port"] == 8000
        with urllib.request.urlopen(f"{fwd['url']}/index.txt", timeout=10) as resp:
            assert resp.read() == b"served from the branch\n"
        status = json.loads(cli("status", "-w", str(project), "--json", cwd=project).stdout)
        assert [f["host_port"] for f in status["forwards"]] == [fwd["host_port"]]
        text = cli("ports", "-w", str(project), cwd=project).stdout
        assert f" · web → {fwd['url']}" in text
        run.send_signal(signal.SIGKILL)
        run.wait(10)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    host_port = int(str(fwd["host_port"]))
    assert wait_for(lambda: port_refuses(host_port))
    time.sleep(0.1)
    after = json.loads(cli("ports", "-w", str(project), "--json", cwd=project).stdout)
    assert after["forwards"] == []


def test_pattern_candidates_each_get_their_own_autostarted_service(project: Path) -> None:
    config = project / ".pydantic-deep" / "config.toml"
    config.write_text(config.read_text() + "autostart = true\n")
    fetch = ("python3 -c \"import urllib.request,os;open('seen-'+os.environ['BRANCHING_ATTEMPT'],"
             "'w').write(urllib.request.urlopen('http://localhost:8000/index.txt').read()"
             ".decode())\"")
    res = cli("best-of-n", "-w", str(project), "-n", "2", "--json", "--", "sh", "-c", fetch,
              cwd=project)
    data = json.loads(res.stdout)
    assert data["committed"], res.stderr
    seen = sorted(p.name for p in project.glob("seen-*"))
    assert len(seen) == 1 and (project / seen[0]).read_text() == "served from the branch\n"
    assert wait_for(lambda: not _servers_left())


def _servers_left() -> bool:
    from tests.sandbox.conftest import processes_with

    return bool(processes_with("forkdeck-cli-test"))
