"""Issue 24.15: a normal user is told what unprivileged use gives up (no memory/CPU limits,
no directory renames on overlay): the clauses ``forkdeck status`` and the TUI's greeting
print, computed for real as uid 65534 (setpriv, the system Python and the standard
library only, as the workspace layer needs); root is told nothing."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from branching_core.sandbox.privileges import unprivileged_limits
from tests.support.unprivileged import (
    NOBODY,
    assert_scenario_ok,
    make_world_readable_root,
    requires_unprivileged,
    run_as_nobody,
)

SCENARIO = """
import json, sys
from branching_core.sandbox.privileges import unprivileged_limits
from branching_core.workspace import Workspace
fstype = Workspace(sys.argv[1]).fstype
print(json.dumps({"fstype": fstype, "unprivileged": unprivileged_limits(fstype)}))
"""


def test_root_gives_up_nothing() -> None:
    if os.geteuid() == 0:
        assert unprivileged_limits("overlay") == []


@requires_unprivileged
def test_status_as_a_normal_user_says_what_it_gives_up() -> None:
    root = make_world_readable_root()
    project = Path(tempfile.mkdtemp(prefix="forkdeck-nobody-ws-"))
    (project / "README.txt").write_text("hello\n")
    os.chmod(project, 0o755)
    os.chown(project, NOBODY, NOBODY)
    os.chown(project / "README.txt", NOBODY, NOBODY)
    out = assert_scenario_ok(run_as_nobody(SCENARIO, root=root, args=[str(project)]))
    data = json.loads(out)
    gives_up = data["unprivileged"]
    assert any("no memory/CPU limits" in clause for clause in gives_up), gives_up
    if data["fstype"] == "overlay":
        assert any("cannot rename directories" in clause for clause in gives_up)
