"""``branch_create`` promises a ``path`` that the client's own file tools can use: another,
unrelated process of the same (unprivileged) user. On overlay the path lives in the
owner's mount helper (``/proc/<pid>/root/...``); here a second process of uid 65534,
not descended from the branch's owner, writes and reads there, and the owner commits it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.unprivileged import (
    NOBODY,
    SYSTEM_PYTHON,
    chown_tree,
    make_world_readable_root,
    requires_unprivileged,
)

OWNER = r"""
import sys
from pathlib import Path
from branching_core import Workspace
ws = Workspace(sys.argv[1], backend=sys.argv[2])
b = ws.branch("client-edit", on_success=None, on_error=None)
print(b.path, flush=True)
sys.stdin.readline()  # the other process edits now
assert (b.path / "edited.txt").read_text() == "from another process\n"
assert not (Path(sys.argv[1]) / "edited.txt").exists()
b.commit()
print("committed", flush=True)
"""

CLIENT = r"""
import sys
from pathlib import Path
path = Path(sys.argv[1])
assert (path / "seed.txt").read_text() == "seed\n"
(path / "edited.txt").write_text("from another process\n")
print("ok")
"""


def _nobody(script: Path, root: Path, *args: str, **popen: object) -> subprocess.Popen[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root / "lib"), "HOME": str(root / "home")}
    return subprocess.Popen(
        ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups",
         str(SYSTEM_PYTHON), str(script), *args],
        cwd=root, env=env, text=True, **popen,  # type: ignore[arg-type]
    )


@requires_unprivileged
@pytest.mark.unprivileged
@pytest.mark.parametrize("backend", ["overlay", "copy"])
def test_branch_path_is_usable_by_another_process_of_the_user(backend: str) -> None:
    root = make_world_readable_root()
    ws = root / "ws"
    ws.mkdir()
    (ws / "seed.txt").write_text("seed\n")
    chown_tree(ws)
    for name, text in (("owner.py", OWNER), ("client.py", CLIENT)):
        (root / name).write_text(text)
        os.chmod(root / name, 0o644)
    owner = _nobody(root / "owner.py", root, str(ws), backend, stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert owner.stdout is not None and owner.stdin is not None
    try:
        path = owner.stdout.readline().strip()
        assert path, owner.stderr.read() if owner.stderr else ""
        if backend == "overlay":  # the case this test is about: the helper's namespace
            assert path.startswith("/proc/") and "/root/" in path, path
        client = _nobody(root / "client.py", root, path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
        out, err = client.communicate(timeout=60)
        assert client.returncode == 0 and out.strip() == "ok", err
        owner.stdin.write("\n")
        owner.stdin.flush()
        assert owner.stdout.readline().strip() == "committed", owner.stderr
        assert owner.wait(timeout=60) == 0
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
    assert Path(ws / "edited.txt").read_text() == "from another process\n"
