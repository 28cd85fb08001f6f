"""Racing agents as a real (non-root) user: the sandbox then makes its own user namespace;
the agent's pseudo-terminal (a private devpts) and the landing must work there too."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.unprivileged import (
    assert_scenario_ok,
    chown_tree,
    make_world_readable_root,
    requires_unprivileged,
    run_as_nobody,
)

pytestmark = requires_unprivileged

SCENARIO = r"""
import json, sys
from pathlib import Path
from branching_core.external import AgentProfile, AgentRace
from branching_core.workspace import Workspace

ws_path = Path(sys.argv[1])
(ws_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
agent = ("import os, sys\n"
         "print('\x1b[32mtty\x1b[0m', os.isatty(0), os.ttyname(0), flush=True)\n"
         "open('calc.py', 'w').write('def add(a, b):\\n    return a + b\\n')\n")
profile = AgentProfile("nobody-agent", (sys.executable, "-c", agent, "{prompt}"),
                       network=False)
race = AgentRace(Workspace(ws_path), [profile], "fix", n=2, pick="first")
outcome = race.run()
lines = [l for run in race.runs.values() for l in run.lines]
print(json.dumps({"winner": outcome.winner, "lines": lines,
                  "calc": (ws_path / "calc.py").read_text()}))
"""


@pytest.fixture
def nobody_root() -> Iterator[Path]:
    root = make_world_readable_root()
    (root / "ws").mkdir()
    chown_tree(root / "ws")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_agents_race_on_a_pty_for_an_unprivileged_user(nobody_root: Path) -> None:
    proc = run_as_nobody(SCENARIO, root=nobody_root, args=[str(nobody_root / "ws")])
    out = json.loads(assert_scenario_ok(proc).strip().splitlines()[-1])
    assert out["winner"] in ("nobody-agent-1", "nobody-agent-2"), out
    assert any("True /dev/pts/" in line for line in out["lines"]), out["lines"]
    assert out["calc"].endswith("a + b\n")
