"""Racing 4 agents: forkdeck branches vs ``git worktree add`` + re-creating the dependencies.

What worktree-based parallel-agent tools make a user do: one ``git worktree add`` per
agent, then the project's dependency tree (``node_modules``, ``.venv``: untracked,
ignored, large) re-created in every worktree before an agent can run its tests; at the
end the winner's change is committed there and brought back (cherry-pick). forkdeck
gives every agent a copy-on-write branch at the workspace's own path, dependencies
included, and lands the winner's files.

Setup (once per run): a git repository of ``--files`` tracked files (10,000 small
source files in 100 directories) plus an ignored ``node_modules`` tree of ``--deps-mb``
MB (300 by default: 3,000 files of 100 kB). The agent is this file run with
``--scripted-agent``: it edits one tracked file, writes a new one, sleeps
``--agent-seconds`` (so the branches are measured while every agent is alive), exits 0.

Measured, in the same run, both ways alternately (``--reps``):
* ``started``: from the start until all 4 agents are running;
* ``disk``: bytes the 4 copies add while they run (``du`` of the worktrees; for forkdeck
  the branch store, where every branch's writes live);
* ``land``: from the winner's pick until its change is in the main tree (worktree:
  ``git add -A && git commit`` in the worktree, ``git cherry-pick`` in the main tree;
  forkdeck: the branch's commit).

Run: ``python benchmarks/agents.py [--reps 3] [--files 10000] [--deps-mb 300]``
(needs the sandbox; prints a Markdown table and the load average).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

AGENTS = 4


def scripted_agent(seconds: float) -> int:
    """The agent: one edit, one new file, a pause, exit 0."""
    target = Path("src/d000/f00000.py")
    target.write_text(target.read_text() + "# edited by the agent\n")
    Path("AGENT_NOTE.md").write_text(f"agent {os.getpid()} was here\n")
    print("agent: edited 2 files", flush=True)
    time.sleep(seconds)
    return 0


def make_repo(root: Path, files: int, deps_mb: int) -> None:
    root.mkdir(parents=True)
    for i in range(files):
        d = root / "src" / f"d{i % 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.py").write_text(f"VALUE_{i} = {i}\n" * 8)
    (root / ".gitignore").write_text("node_modules/\n")
    git = ["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    chunk = os.urandom(100_000)
    count = deps_mb * 10
    for i in range(count):
        d = root / "node_modules" / f"pkg{i // 30:04d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"m{i:05d}.js").write_bytes(chunk[: 100_000 - (i % 7)] + str(i).encode())


def du(path: Path) -> int:
    out = subprocess.run(["du", "-sxb", str(path)], capture_output=True, text=True)
    return int(out.stdout.split()[0]) if out.returncode == 0 and out.stdout else 0


def agent_argv(seconds: float) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), "--scripted-agent", str(seconds)]


def run_worktrees(repo: Path, seconds: float) -> dict[str, float]:
    """4 worktrees, node_modules copied into each (cp -a: faster than any install), 4
    agents, then the first one's change committed and cherry-picked."""
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    base = Path(tempfile.mkdtemp(prefix="wt-", dir=repo.parent))
    t0 = time.monotonic()
    procs = []
    trees = []
    for i in range(AGENTS):
        tree = base / f"agent{i}"
        subprocess.run([*git, "-C", str(repo), "worktree", "add", "-q", "-b", f"agent{i}",
                        str(tree)], check=True)
        subprocess.run(["cp", "-a", str(repo / "node_modules"), str(tree / "node_modules")],
                       check=True)
        procs.append(subprocess.Popen(agent_argv(seconds), cwd=tree, stdout=subprocess.DEVNULL))
        trees.append(tree)
    started = time.monotonic() - t0
    time.sleep(min(0.5, seconds / 2))
    disk = du(base)
    for proc in procs:
        proc.wait()
    t1 = time.monotonic()
    winner = trees[0]
    subprocess.run([*git, "-C", str(winner), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(winner), "commit", "-qm", "agent"], check=True)
    subprocess.run([*git, "-C", str(repo), "cherry-pick", "-n", "agent0"], check=True,
                   stdout=subprocess.DEVNULL)
    land = time.monotonic() - t1
    # Put the main tree back as it was, for the next round.
    subprocess.run([*git, "-C", str(repo), "reset", "-q", "--hard"], check=True)
    subprocess.run(["git", "-C", str(repo), "clean", "-qfd", "-e", "node_modules"], check=True)
    for i, tree in enumerate(trees):
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)],
                       check=True)
        subprocess.run(["git", "-C", str(repo), "branch", "-qD", f"agent{i}"], check=True)
    shutil.rmtree(base, ignore_errors=True)
    return {"started": started, "disk": disk, "land": land}


def run_forkdeck(repo: Path, seconds: float) -> dict[str, float]:
    from branching_core.external import AgentProfile, AgentRace
    from branching_core.workspace import Workspace

    ws = Workspace(repo)
    profile = AgentProfile("scripted", (*agent_argv(seconds), "{prompt}"),
                           network=False, steer=False)
    disk: list[int] = []
    started_all = threading.Event()

    def on_event(kind: str, run: object) -> None:
        if kind == "started" and len(race.runs) == AGENTS:
            started_all.set()

    def measure() -> None:
        if started_all.wait(60):
            time.sleep(min(0.5, seconds / 2))
            disk.append(du(ws.tree.store.root))

    race = AgentRace(ws, [profile], "edit", n=AGENTS, pick="first", on_event=on_event)
    watcher = threading.Thread(target=measure)
    watcher.start()
    outcome = race.run()
    watcher.join()
    assert outcome.winner is not None, outcome.to_json()
    result = {"started": outcome.started_all_s, "disk": float(disk[0] if disk else 0),
              "land": outcome.landed_s}
    subprocess.run(["git", "-C", str(repo), "reset", "-q", "--hard"], check=True)
    subprocess.run(["git", "-C", str(repo), "clean", "-qfd", "-e", "node_modules"], check=True)
    ws.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--deps-mb", type=int, default=300)
    parser.add_argument("--agent-seconds", type=float, default=1.0)
    parser.add_argument("--scripted-agent", type=float, default=None, help=argparse.SUPPRESS)
    args, _prompt = parser.parse_known_args(argv)  # the agent also gets the prompt
    if args.scripted_agent is not None:
        return scripted_agent(args.scripted_agent)
    base = Path(tempfile.mkdtemp(prefix="forkdeck-bench-agents-", dir="/var/tmp"))
    try:
        repo = base / "repo"
        t = time.monotonic()
        make_repo(repo, args.files, args.deps_mb)
        print(f"repo: {args.files} tracked files + {du(repo / 'node_modules') / 1e6:.0f} MB "
              f"node_modules, made in {time.monotonic() - t:.1f} s", file=sys.stderr)
        rows: dict[str, list[dict[str, float]]] = {"git worktree + deps": [], "forkdeck": []}
        for _ in range(args.reps):
            rows["git worktree + deps"].append(run_worktrees(repo, args.agent_seconds))
            rows["forkdeck"].append(run_forkdeck(repo, args.agent_seconds))
        print(f"\n{AGENTS} agents, {args.files} files + {args.deps_mb} MB dependency tree, "
              f"median of {args.reps}\n")
        print("| way | all agents started | disk used while running | land the winner |")
        print("|---|---:|---:|---:|")
        for name, runs in rows.items():
            started = statistics.median(r["started"] for r in runs)
            disk = statistics.median(r["disk"] for r in runs)
            land = statistics.median(r["land"] for r in runs)
            print(f"| {name} | {started * 1000:.0f} ms | {disk / 1e6:.1f} MB | "
                  f"{land * 1000:.0f} ms |")
        print(f"\nload average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
              f"{os.getloadavg()[2]:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
