"""``land_files``: whole files into a workspace in one journaled commit, no branch.

What the combined merge (fork.combine) uses instead of writing into a fresh branch. It
must keep every guarantee of a branch commit: exactly the given changes (modes, symlinks,
new directories, deletions, a directory replaced by a file), the conflict rule, nothing
applied on a conflict or a failing step, all or nothing across a SIGKILL at any step, and
nothing left behind in the user's project.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from branching_core.errors import CommitError, ConflictError
from branching_core.workspace import Workspace
from branching_core.workspace.faults import CRASH_ENV, CRASH_WITH_ENV, reset_injected_faults
from branching_core.workspace.fsutil import PROJECT_STATE_DIR
from branching_core.workspace.land import NewFile, land_files


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    os.chmod(root / "a.txt", 0o755)
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("b\n")
    (root / "d").mkdir()
    (root / "d" / "inner.txt").write_text("inner\n")
    return root


def _snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != PROJECT_STATE_DIR]
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            st = os.lstat(full)
            data = (
                os.readlink(full).encode()
                if stat.S_ISLNK(st.st_mode)
                else full.read_bytes()
                if stat.S_ISREG(st.st_mode)
                else b"<dir>"
            )
            out[str(full.relative_to(root))] = (st.st_mode, data)
    return out


def _sources(tmp_path: Path) -> dict[str, NewFile | None]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "secret").write_text("c\n")
    os.chmod(src / "secret", 0o600)
    os.symlink("a.txt", src / "link")
    return {
        "a.txt": NewFile(data=b"A\n"),
        "new/deep/c.txt": NewFile(source=src / "secret"),
        "link": NewFile(source=src / "link"),
        "sub/b.txt": None,
        "d": NewFile(data=b"now a file\n"),
    }


def _check_landed(root: Path) -> None:
    assert (root / "a.txt").read_text() == "A\n"
    assert stat.S_IMODE(os.stat(root / "a.txt").st_mode) == 0o755  # the mode it replaced
    assert (root / "new" / "deep" / "c.txt").read_text() == "c\n"
    assert stat.S_IMODE(os.stat(root / "new" / "deep" / "c.txt").st_mode) == 0o600
    assert os.readlink(root / "link") == "a.txt"
    assert not (root / "sub" / "b.txt").exists()
    assert (root / "d").read_text() == "now a file\n"


def test_lands_exactly_the_given_files(tmp_path: Path) -> None:
    root = _project(tmp_path / "ws")
    ws = Workspace(root, backend="copy")
    since = time.time_ns()
    changes = land_files(ws, _sources(tmp_path), since_ns=since)
    _check_landed(root)
    assert changes.created == ["link", "new", "new/deep", "new/deep/c.txt"]
    assert changes.modified == ["a.txt", "d"]
    assert changes.deleted == ["sub/b.txt"]
    assert not (root / PROJECT_STATE_DIR).exists()  # nothing left in the project
    assert list(ws.tree.store.journal_dir.glob("*")) == []


def test_a_parent_change_since_is_a_conflict_and_nothing_lands(tmp_path: Path) -> None:
    root = _project(tmp_path / "ws")
    ws = Workspace(root, backend="copy")
    since = time.time_ns()
    time.sleep(0.02)  # past the coarse clock's tick
    (root / "a.txt").write_text("third party\n")
    before = _snapshot(root)
    with pytest.raises(ConflictError) as caught:
        land_files(ws, _sources(tmp_path), since_ns=since)
    assert caught.value.paths == ["a.txt"]
    assert _snapshot(root) == before
    assert not (root / PROJECT_STATE_DIR).exists()


def test_a_path_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    root = _project(tmp_path / "ws")
    ws = Workspace(root, backend="copy")
    for bad in ("../x", "/etc/x", f"{PROJECT_STATE_DIR}/x", ""):
        with pytest.raises(ValueError):
            land_files(ws, {bad: NewFile(data=b"x")}, since_ns=time.time_ns())


def test_a_failing_step_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path / "ws")
    ws = Workspace(root, backend="copy")
    before = _snapshot(root)
    monkeypatch.setenv(CRASH_ENV, "op:3")
    monkeypatch.setenv(CRASH_WITH_ENV, "eio")
    reset_injected_faults()
    with pytest.raises(CommitError, match="rolled back"):
        land_files(ws, _sources(tmp_path), since_ns=time.time_ns())
    assert _snapshot(root) == before
    assert not (root / PROJECT_STATE_DIR).exists()


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from branching_core.workspace import Workspace
    from branching_core.workspace.land import NewFile, land_files
    root, src = Path(sys.argv[1]), Path(sys.argv[2])
    files = {
        "a.txt": NewFile(data=b"A\\n"),
        "new/deep/c.txt": NewFile(source=src / "secret"),
        "link": NewFile(source=src / "link"),
        "sub/b.txt": None,
        "d": NewFile(data=b"now a file\\n"),
    }
    land_files(Workspace(root, backend="copy"), files, since_ns=time.time_ns())
    """
)


@pytest.mark.parametrize(
    "crash_at", ["staged", "journaled", *[f"op:{i}" for i in range(8)], "applied", "finishing"]
)
def test_sigkill_at_any_step_is_all_or_nothing(tmp_path: Path, crash_at: str) -> None:
    root = _project(tmp_path / "ws")
    _sources(tmp_path)  # the source files
    before = _snapshot(root)
    env = {**os.environ, CRASH_ENV: crash_at}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(tmp_path / "src")],
        env=env,
        capture_output=True,
        check=False,
    )
    assert child.returncode == -9, (
        f"the landing ran through without reaching step {crash_at}: {child.stderr!r}"
    )
    Workspace(root, backend="copy")  # the next open finishes (or forgets) the commit
    after = _snapshot(root)
    if after != before:
        _check_landed(root)
    assert crash_at in ("staged",) or after != before  # past the journal: rolled forward
    assert not (root / PROJECT_STATE_DIR).exists()
