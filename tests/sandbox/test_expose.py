"""``expose=``: named paths the masks hide, shown at their own path, read-only unless
declared writable (what an external agent's profile asks for); ``pty=True``: a private
devpts so the sandbox can open pseudo-terminals. Both executors (conftest.executor)."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.errors import WorkspaceError
from branching_core.sandbox import run_command

pytestmark = [pytest.mark.usefixtures("executor")]

PROBE = ("import sys\nfor p in sys.argv[1:]:\n"
         "    try:\n        r = open(p).read().strip()\n    except OSError as e:\n"
         "        r = 'NOREAD'\n"
         "    try:\n        open(p, 'a').write('x')\n        w = 'WROTE'\n"
         "    except OSError:\n        w = 'NOWRITE'\n"
         "    print(p, r, w)\n")


@pytest.fixture
def home(sandbox_ok: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = Path(f"/var/tmp/forkdeck-expose-{secrets.token_hex(4)}")
    (path / ".ssh").mkdir(parents=True)
    (path / ".ssh" / "id_ed25519").write_text("KEY")
    (path / ".agent").mkdir()
    (path / ".agent" / "session").write_text("S")
    (path / ".agent.json").write_text("J")
    monkeypatch.setenv("HOME", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _probe(tmp_path: Path, paths: list[Path], **kwargs: object) -> dict[str, tuple[str, str]]:
    res = run_command([sys.executable, "-c", PROBE, *map(str, paths)], tmp_path, timeout=30,
                      **kwargs)  # type: ignore[arg-type]
    assert res.exit_code == 0, res.stderr
    return {Path(line.split()[0]).name: (line.split()[1], line.split()[2])
            for line in res.stdout.splitlines()}


def test_only_named_paths_come_back_with_their_mode(home: Path, tmp_path: Path) -> None:
    paths = [home / ".ssh" / "id_ed25519", home / ".agent" / "session", home / ".agent.json"]
    assert _probe(tmp_path, paths) == {"id_ed25519": ("NOREAD", "NOWRITE"),
                                       "session": ("NOREAD", "NOWRITE"),
                                       ".agent.json": ("NOREAD", "NOWRITE")}
    got = _probe(tmp_path, paths, expose=[(home / ".agent", False), (home / ".agent.json", True)])
    assert got == {"id_ed25519": ("NOREAD", "NOWRITE"), "session": ("S", "NOWRITE"),
                   ".agent.json": ("J", "WROTE")}
    assert (home / ".agent" / "session").read_text() == "S"
    assert (home / ".agent.json").read_text() == "Jx"


def test_a_missing_exposed_path_is_skipped(home: Path, tmp_path: Path) -> None:
    got = _probe(tmp_path, [home / ".agent" / "session"],
                 expose=[(home / ".nothing", True)])
    assert got == {"session": ("NOREAD", "NOWRITE")}


@pytest.mark.parametrize("bad", ["/", "relative/path"])
def test_unsafe_exposes_are_refused(home: Path, tmp_path: Path, bad: str) -> None:
    with pytest.raises(WorkspaceError):
        run_command(["true"], tmp_path, expose=[(bad, False)])


def test_the_branch_view_cannot_be_exposed_over(home: Path, tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="branch view"):
        run_command(["true"], tmp_path, expose=[(os.path.dirname(tmp_path), True)])


def test_pty_gives_a_private_devpts(sandbox_ok: None, tmp_path: Path) -> None:
    script = "import os, pty\nm, s = pty.openpty()\nprint(os.ttyname(s))\n"
    res = run_command([sys.executable, "-c", script], tmp_path, timeout=30, pty=True)
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip() == "/dev/pts/0"  # a fresh instance: the first pty is 0
    res = run_command([sys.executable, "-c", script], tmp_path, timeout=30)
    assert res.exit_code != 0  # without it, no pseudo-terminal
