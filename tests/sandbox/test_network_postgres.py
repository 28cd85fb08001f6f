"""A real PostgreSQL per branch: its data directory forked with the branch.

PostgreSQL refuses to run as root, so the scenario runs as uid 65534 (as a real user
would run forkdeck: ``tests/support/unprivileged``), with ``mode="none"`` namespaces
(loopback only: a normal user cannot open this machine's mode-0600 /dev/net/tun, and
the database needs no outbound access), on the ``copy`` backend (on ``overlay`` a normal
user's commands are uid 0 of the view helper's user namespace, which postgres refuses).
``initdb`` runs once per session; each test copies that cluster into its workspace.
"""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.unprivileged import (
    NOBODY,
    assert_scenario_ok,
    chown_tree,
    make_world_readable_root,
    requires_unprivileged,
    run_as_nobody,
)


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


PG_BIN = _pg_bin()
pytestmark = [
    requires_unprivileged,
    pytest.mark.skipif(PG_BIN is None, reason="postgresql not installed (.ci/run installs it)"),
]

SCENARIO = r'''
import json, os, sys
from branching_core import Workspace
from branching_core.sandbox.branch_net import BranchNetwork
from branching_core.sandbox.services import ServiceSpec

root, pg_bin = sys.argv[1], sys.argv[2]
# copy backend: a normal user's overlay views live in a helper's user namespace where
# they are uid 0, and postgres refuses uid 0 (docs/network.md: the recipe's backends)
ws = Workspace(root, backend="copy")
db = ServiceSpec(
    "db", f"exec {pg_bin}/postgres -D ./pgdata -k . -p 5432 -c listen_addresses=127.0.0.1 "
          "-c fsync=off -c shared_buffers=8MB", port=5432, ready="tcp", stop_signal="INT")
psql = f"{pg_bin}/psql -h 127.0.0.1 -p 5432 -d postgres -XAtq -c "
out = {"fstype": ws.fstype}
branches, nets = {}, {}
for name in ("a", "b"):
    branch = ws.branch(name, on_success=None)
    net = BranchNetwork.for_branch(branch, mode="none", services=[db])
    net.start_service("db")  # both on 5432, each in its branch's namespace
    res = net.run(psql + f"\"insert into t values ('{name}')\"", timeout=60)
    assert res.exit_code == 0, res.stderr
    branches[name], nets[name] = branch, net
for name, net in nets.items():
    res = net.run(psql + "\"select v from t order by v\"", timeout=60)
    out[name] = [res.exit_code, res.stdout.split(), res.stderr]
branches["b"].abort()
branches["a"].commit()  # stops a's postgres (SIGINT: fast shutdown) before committing
after = BranchNetwork(root, label="main", mode="none", services=[db])
try:
    after.start_service("db")
    res = after.run(psql + "\"select v from t order by v\"", timeout=60)
    out["workspace"] = [res.exit_code, res.stdout.split(), res.stderr]
finally:
    after.close()
print(json.dumps(out))
'''


@pytest.fixture(scope="session")
def template_cluster() -> Iterator[Path]:
    """One initialised cluster (with table ``t``), made once, owned by uid 65534 (in
    /tmp: pytest's own tmp dirs are not reachable for that user)."""
    assert PG_BIN is not None
    base = Path(tempfile.mkdtemp(prefix="forkdeck-pg-"))
    data = base / "pgdata"
    as_nobody = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
    base.chmod(0o777)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(base), "LC_ALL": "C"}
    subprocess.run([*as_nobody, str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust",
                    "--no-sync", "-U", "nobody", "--wal-segsize=1"], check=True,
                   capture_output=True, env=env, cwd=base)
    # the table, created once in single-user mode (no server, no socket needed)
    subprocess.run([*as_nobody, str(PG_BIN / "postgres"), "--single", "-D", str(data),
                    "postgres"], input=b"create table t (v text);\n", check=True,
                   capture_output=True, env=env, cwd=base)
    yield data
    shutil.rmtree(base, ignore_errors=True)


def test_each_branch_has_its_own_database_and_the_winner_lands(template_cluster: Path
                                                               ) -> None:
    assert PG_BIN is not None
    root = make_world_readable_root()
    try:
        ws = root / "ws"
        shutil.copytree(template_cluster, ws / "pgdata", symlinks=True)
        chown_tree(ws)
        (ws / "pgdata").chmod(0o700)
        proc = run_as_nobody(SCENARIO, root=root, args=[str(ws), str(PG_BIN)], timeout=180)
        out = json.loads(assert_scenario_ok(proc).strip().splitlines()[-1])
        assert out["a"][:2] == [0, ["a"]], out["a"]
        assert out["b"][:2] == [0, ["b"]], out["b"]
        assert out["workspace"][:2] == [0, ["a"]], out["workspace"]
    finally:
        shutil.rmtree(root, ignore_errors=True)
