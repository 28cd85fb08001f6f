"""What each network mode costs, and what a host forward adds (one run; markdown tables).

1. Sandbox start: a sandboxed ``true`` with ``network="none"``, ``"private"`` (a namespace
   of its own plus the user-mode stack, made and ended per command) and ``"host"``, and
   a command joining an existing branch namespace (what a branch's later commands pay),
   all in the same run.
2. Making a branch's network (``NetNamespace``) with pasta, with slirp4netns, and with
   loopback only.
3. First HTTP response: a fresh connection and one GET to a server on the host's loopback
   directly, versus through a host forward into a branch (server in the branch).

    .venv/bin/python benchmarks/network.py [--runs 30]
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branching_core.sandbox import run_command
from branching_core.sandbox.branch_net import BranchNetwork
from branching_core.sandbox.netstack import NetNamespace, NetworkUnavailable
from branching_core.sandbox.services import ServiceSpec


def _time(fn: Callable[[], object], runs: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def _row(name: str, samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return f"| {name} | {q[49]:.2f} | {q[89]:.2f} | {len(samples)} |"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"no server on port {port}")


def _get(port: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/hello.txt")
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 200


def main() -> None:
    parser = argparse.ArgumentParser(description="network modes and host forwards: costs")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    runs = args.runs
    scratch = Path(tempfile.mkdtemp(prefix="forkdeck-netbench-"))
    try:
        (scratch / "hello.txt").write_text("hello\n")
        print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
              f"{os.getloadavg()[2]:.2f}; {runs} runs each; ms\n")
        print("| sandboxed `true` | p50 ms | p90 ms | runs |\n|---|---|---|---|")
        for mode in ("none", "private", "host"):
            samples = _time(lambda m=mode: run_command(["true"], scratch, network=m), runs)
            print(_row(f"network={mode}", samples))
        with NetNamespace() as ns:
            print(_row("joining a branch's namespace",
                       _time(lambda: run_command(["true"], scratch, network=ns), runs)))

        print("\n| making a branch network | p50 ms | p90 ms | runs |\n|---|---|---|---|")
        for label, kwargs in (("pasta", {"stack": "pasta"}),
                              ("slirp4netns", {"stack": "slirp4netns"}),
                              ("loopback only (none)", {"outbound": False})):
            try:
                NetNamespace(**kwargs).close()  # type: ignore[arg-type]
            except NetworkUnavailable as exc:
                print(f"| {label} | unavailable: {exc} | | |")
                continue
            print(_row(label, _time(lambda k=kwargs: NetNamespace(**k).close(),  # type: ignore[arg-type]
                                    max(5, runs // 2))))

        print("\n| first HTTP response (new connection + GET) | p50 ms | p90 ms | runs |\n"
              "|---|---|---|---|")
        # both servers are the same program in a process of its own: only the path differs
        direct_port = _free_port()
        host = subprocess.Popen([sys.executable, "-m", "http.server", str(direct_port),
                                 "--bind", "127.0.0.1"], cwd=scratch,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_port(direct_port)
            print(_row("direct to a server on the host",
                       _time(lambda: _get(direct_port), runs * 3)))
        finally:
            host.terminate()
            host.wait()
        spec = ServiceSpec("web", "exec python3 -m http.server 8000 --bind 127.0.0.1", port=8000,
                           ready="http", stop_timeout=3)
        with BranchNetwork(scratch, label="bench", mode="none", services=[spec]) as net:
            net.start_service("web")
            fwd = net.forwards[8000].host_port
            print(_row("through a host forward into a branch",
                       _time(lambda: _get(fwd), runs * 3)))
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
