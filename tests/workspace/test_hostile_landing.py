"""Issue 22: every landing path attacked with the same hostile shapes; nothing outside the
workspace changes, and a refused change leaves the workspace exactly as it was.

The landing paths: the one landing function itself (``land_files``), a fork merge (pick,
and a stale winner landed path by path), a combine, a sub-agent's landing (commit and
stale), a Ray node's delta (``cluster.delta.apply``, what ``RemoteBranch.commit`` calls;
the real-Ray regression is ``tests/cluster/test_hostile_delta.py``), an IDE save through
the mirror, and the CLI's ``run`` commit. Each test snapshots a canary directory outside
the workspace and the workspace itself before and after.

Which shape reaches which path: a path *string* (absolute, ``..``, NUL, the state dir, a
path below a link, a link made earlier in the same change) can only be offered where a
caller names paths (land_files, a delta, a combine selection, an IDE's mirror path);
a branch's view is a real directory, where the same attacks take the form of what a
model can make there (a symlink out, a parent directory swapped for a link, setuid
files, FIFOs, devices), offered to the paths that land a branch (pick, sub-agent, CLI).
Real parts throughout: real workspaces (overlay and copy), real pydantic-ai agents on
FunctionModel, the real mirror watcher, the real CLI in a subprocess, real sandboxes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from branching_core.cluster.delta import Delta
from branching_core.cluster.delta import apply as apply_delta
from branching_core.cluster.snapshot import take
from branching_core.errors import UnsafeChangeError
from branching_core.fork import MergeAction
from branching_core.fork.combine import CombineError
from branching_core.fork.mirror.links import DEAD_LINK_DIR
from branching_core.live.subagents.merge import land as land_subagent
from branching_core.workspace import Workspace
from branching_core.workspace.land import NewFile, land_files
from branching_core.workspace.paths import is_internal_path, path_problem
from tests.fork.test_mirror import eventually
from tests.review.forks import fork_with

REPO = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="devices and root-owned setuid files need root")
State = dict[str, tuple[Any, ...]]


# -- the canary and the snapshots ------------------------------------------------------------
def snapshot(root: Path) -> State:
    """Every entry under ``root`` (links not followed): kind, mode, content hash or target.
    The workspace's ``.pydantic-deep`` is bookkeeping, not content: left out."""
    out: State = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != ".pydantic-deep"]
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(Path(full).read_bytes()).hexdigest()
                out[rel] = ("f", stat.S_IMODE(st.st_mode), digest)
            else:
                out[rel] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
    return out


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """A directory outside the workspace, beside it (so ``../canary`` reaches it)."""
    root = tmp_path / "canary"
    (root / "sub").mkdir(parents=True)
    (root / "target.txt").write_text("canary\n")
    (root / "sub" / "deep.txt").write_text("deep canary\n")
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("VALUE = 1\n")
    (root / "README.txt").write_text("hello\n")
    (root / "out").mkdir()  # a directory a third party will swap for a link
    return root


@pytest.fixture(params=["overlay", "copy"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


class Guarded:
    """The canary and the workspace as they were; ``unchanged()`` checks both."""

    def __init__(self, canary: Path, project: Path) -> None:
        self.canary, self.project = canary, project
        self.canary_before = snapshot(canary)
        self.project_before = snapshot(project)

    def canary_intact(self) -> None:
        assert snapshot(self.canary) == self.canary_before

    def unchanged(self) -> None:
        self.canary_intact()
        assert snapshot(self.project) == self.project_before


def _swap_out_for_link(project: Path, canary: Path) -> None:
    """A third party (or an earlier landing) turns ``out/`` into ``out -> canary``."""
    shutil.rmtree(project / "out")
    os.symlink(canary, project / "out")


# -- the shapes a caller can name ---------------------------------------------------------------
def path_shapes(canary: Path) -> dict[str, str]:
    return {
        "absolute": str(canary / "target.txt"),
        "dotdot": "../canary/target.txt",
        "deep-dotdot": "src/../../../canary/target.txt",
        "nul": "src/evil\0.txt",
        "state-dir": ".pydantic-deep/config.toml",
        "empty-component": "src//app.py",
    }


# -- 1. the one landing function --------------------------------------------------------------
@pytest.mark.parametrize(
    "shape", ["absolute", "dotdot", "deep-dotdot", "nul", "state-dir", "empty-component"]
)
def test_land_files_refuses_every_bad_path_and_applies_nothing(
    project: Path, canary: Path, backend: str, shape: str
) -> None:
    ws = Workspace(project, backend=backend)
    guard = Guarded(canary, project)
    bad = path_shapes(canary)[shape]
    for files, dirs in (
        ({bad: NewFile(data=b"pwned\n"), "fine.txt": NewFile(data=b"ok\n")}, {}),
        ({bad: None}, {}),
        ({bad: NewFile(link="/etc/passwd")}, {}),
        ({}, {bad: 0o755}),
    ):
        with pytest.raises(UnsafeChangeError) as info:
            land_files(ws, files, dirs=dirs, since_ns=time.time_ns(), label="hostile")
        assert bad in info.value.paths
    guard.unchanged()
    ws.close()


def test_land_files_never_writes_through_a_link_of_the_parent_or_of_the_same_change(
    project: Path, canary: Path, backend: str
) -> None:
    ws = Workspace(project, backend=backend)
    _swap_out_for_link(project, canary)
    guard = Guarded(canary, project)
    since = time.time_ns()
    attempts: list[tuple[dict[str, NewFile | None], dict[str, int]]] = [
        ({"out/target.txt": NewFile(data=b"pwned\n")}, {}),  # the parent's link
        ({"out/target.txt": None}, {}),
        ({"out/new.txt": NewFile(data=b"pwned\n")}, {}),
        ({}, {"out/sub": 0o755}),
        # a link the same change makes, then a write through it
        ({"lnk": NewFile(link=str(canary)), "lnk/target.txt": NewFile(data=b"pwned\n")}, {}),
        ({"lnk": NewFile(link="../canary"), "lnk/sub/deep.txt": NewFile(data=b"x")}, {}),
    ]
    for files, dirs in attempts:
        with pytest.raises(UnsafeChangeError, match="symlink"):
            land_files(ws, files, dirs=dirs, since_ns=since, label="hostile")
    guard.unchanged()
    ws.close()


def test_land_files_refuses_fifos_and_strips_setuid_setgid(
    project: Path, canary: Path, tmp_path: Path, backend: str
) -> None:
    ws = Workspace(project, backend=backend)
    guard = Guarded(canary, project)
    elsewhere = tmp_path / "sources"
    elsewhere.mkdir()
    os.mkfifo(elsewhere / "pipe")
    with pytest.raises(UnsafeChangeError, match="FIFO"):
        land_files(ws, {"pipe": NewFile(source="pipe")}, since_ns=time.time_ns(),
                   source_root=elsewhere)
    guard.unchanged()
    shutil.copy(sys.executable, elsewhere / "tool")
    os.chmod(elsewhere / "tool", 0o6755)
    land_files(
        ws,
        {"tool": NewFile(source="tool"), "data.bin": NewFile(data=b"x", mode=0o4755)},
        since_ns=time.time_ns(),
        source_root=elsewhere,
    )
    assert stat.S_IMODE(os.stat(project / "tool").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(project / "data.bin").st_mode) == 0o755
    guard.canary_intact()
    ws.close()


def _give_caps(path: Path) -> None:
    """``setcap cap_net_raw+ep``: a v2 ``security.capability`` (effective flag, permitted
    bit 13), as the kernel stores it."""
    blob = struct.pack("<IIIII", 0x02000001, 1 << 13, 0, 0, 0)
    os.setxattr(path, "security.capability", blob, follow_symlinks=False)


def _has_caps(path: Path) -> bool:
    try:
        os.getxattr(path, "security.capability", follow_symlinks=False)
    except OSError:
        return False
    return True


@needs_root
async def test_file_capabilities_are_stripped_on_a_pick_and_by_land_files(
    project: Path, canary: Path, tmp_path: Path, backend: str
) -> None:
    coord, views = await _fork(project, backend, "a", "b")
    shutil.copy(sys.executable, views["a"] / "capped")
    _give_caps(views["a"] / "capped")
    assert _has_caps(views["a"] / "capped")
    await coord.merge_or_select(MergeAction.pick("a"))
    assert (project / "capped").exists() and not _has_caps(project / "capped")
    await coord.aclose()
    sources = tmp_path / "sources"
    sources.mkdir()
    shutil.copy(sys.executable, sources / "capped2")
    _give_caps(sources / "capped2")
    ws = Workspace(project, backend=backend)
    land_files(ws, {"capped2": NewFile(source="capped2")}, since_ns=time.time_ns(),
               source_root=sources)
    assert not _has_caps(project / "capped2")
    ws.close()


# -- 2. a Ray node's delta (the driver's landing of what a node sent) --------------------------
@pytest.mark.parametrize(
    "part", ["files", "deleted", "dirs", "symlinks"],
)
@pytest.mark.parametrize("shape", ["absolute", "dotdot", "deep-dotdot", "nul", "state-dir"])
def test_a_delta_with_a_bad_key_in_any_part_is_refused_whole(
    project: Path, canary: Path, part: str, shape: str
) -> None:
    ws = Workspace(project)
    snap = take(project)
    guard = Guarded(canary, project)
    bad = path_shapes(canary)[shape]
    delta = Delta(files={"fine.txt": (0o644, b"ok\n")})
    if part == "files":
        delta.files[bad] = (0o644, b"pwned\n")
    elif part == "deleted":
        delta.deleted.append(bad)
    elif part == "dirs":
        delta.dirs[bad] = 0o755
    else:
        delta.symlinks[bad] = "/etc/passwd"
    with pytest.raises(UnsafeChangeError) as info:
        apply_delta(ws, delta, snap, name="node")
    assert bad in info.value.paths
    guard.unchanged()
    ws.close()


def test_a_delta_never_writes_through_a_link_and_loses_setuid(
    project: Path, canary: Path
) -> None:
    ws = Workspace(project)
    snap = take(project)
    guard = Guarded(canary, project)
    for delta in (
        Delta(symlinks={"lnk": str(canary)}, files={"lnk/target.txt": (0o644, b"pwned\n")}),
        Delta(symlinks={"lnk": "../canary"}, deleted=["lnk/target.txt"]),
        Delta(symlinks={"src2": str(canary)}, dirs={"src2/sub/new": 0o755}),
        # a directory that is a symlink in the parent, written through
        Delta(files={"out/../README.txt": (0o644, b"x")}),
        Delta(files={"ok.txt": (0o644, "not bytes")}),  # type: ignore[dict-item]
        Delta(files={"ok.txt": (0o104755, b"mode with a file type")}),
    ):
        with pytest.raises(UnsafeChangeError):
            apply_delta(ws, delta, snap, name="node")
    guard.unchanged()
    _swap_out_for_link(project, canary)
    snap = take(project)
    guard = Guarded(canary, project)
    with pytest.raises(UnsafeChangeError, match="symlink"):
        apply_delta(ws, Delta(files={"out/target.txt": (0o644, b"pwned\n")}), snap, "node")
    guard.unchanged()
    apply_delta(ws, Delta(files={"tool": (0o6755, b"#!/bin/sh\n")}), snap, name="node")
    assert stat.S_IMODE(os.stat(project / "tool").st_mode) == 0o755
    guard.canary_intact()
    ws.close()


# -- 3. a fork merge (pick) and a combine ------------------------------------------------------
async def _fork(project: Path, backend: str, *labels: str) -> Any:
    ws = Workspace(project, backend=backend)
    coord = await fork_with(ws, {label: [] for label in labels})
    views = {rt.label: Path(rt.ws_branch.path) for rt in coord.branches.values()}
    return coord, views


async def test_a_pick_lands_a_link_as_a_link_and_strips_setuid(
    project: Path, canary: Path, backend: str
) -> None:
    guard = Guarded(canary, project)
    coord, views = await _fork(project, backend, "a", "b")
    a = views["a"]
    os.symlink(canary / "target.txt", a / "notes.txt")  # ln -s ~/.bashrc notes.txt
    os.symlink("../canary", a / "up")
    shutil.copy(sys.executable, a / "t")
    os.chmod(a / "t", 0o4755)
    (a / "sg").write_text("x")
    os.chmod(a / "sg", 0o2755)
    result = await coord.merge_or_select(MergeAction.pick("a"))
    assert not result.conflicts and not result.errors
    assert os.readlink(project / "notes.txt") == str(canary / "target.txt")
    assert os.readlink(project / "up") == "../canary"
    assert stat.S_IMODE(os.lstat(project / "t").st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(project / "sg").st_mode) == 0o755
    guard.canary_intact()
    await coord.aclose()


@pytest.mark.parametrize("special", ["fifo", pytest.param("device", marks=needs_root)])
async def test_a_pick_refuses_a_fifo_or_device_and_applies_nothing(
    project: Path, canary: Path, backend: str, special: str
) -> None:
    guard = Guarded(canary, project)
    coord, views = await _fork(project, backend, "a", "b")
    (views["a"] / "new.txt").write_text("would land\n")
    if special == "fifo":
        os.mkfifo(views["a"] / "special")
    else:
        os.mknod(views["a"] / "special", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    with pytest.raises(UnsafeChangeError, match="FIFO" if special == "fifo" else "device"):
        await coord.merge_or_select("pick:a")
    guard.unchanged()
    await coord.merge_or_select(MergeAction.abort())
    await coord.aclose()


async def test_a_pick_never_lands_below_a_directory_swapped_for_a_link(
    project: Path, canary: Path, backend: str
) -> None:
    coord, views = await _fork(project, backend, "a", "b")
    (views["a"] / "out" / "target.txt").write_text("pwned\n")
    time.sleep(0.01)
    _swap_out_for_link(project, canary)  # after the fork: the parent's out/ is now a link
    guard = Guarded(canary, project)
    try:  # overlay sees out/ changed in the parent (a conflict), copy sees the link
        result = await coord.merge_or_select("pick:a")
        assert "out" in result.conflicts and "out/target.txt" not in result.applied_paths
    except UnsafeChangeError as exc:
        assert "out is a symlink" in str(exc)
    guard.unchanged()
    await coord.merge_or_select("abort")
    await coord.aclose()


async def test_a_stale_winner_lands_path_by_path_under_the_same_rule(
    project: Path, canary: Path, backend: str
) -> None:
    """A sibling committed first (the winner is stale): its paths land through
    ``land_files``, journaled, with the same checks."""
    coord, views = await _fork(project, backend, "a", "b")
    ws = coord.workspace
    other = ws.branch("other", on_success=None)
    (Path(other.path) / "elsewhere.txt").write_text("first\n")
    other.commit()
    a = views["a"]
    os.symlink(canary / "target.txt", a / "notes.txt")
    shutil.copy(sys.executable, a / "t")
    os.chmod(a / "t", 0o4755)
    guard = Guarded(canary, project)
    result = await coord.merge_or_select("pick:a")
    assert not result.errors
    assert os.readlink(project / "notes.txt") == str(canary / "target.txt")
    assert stat.S_IMODE(os.lstat(project / "t").st_mode) == 0o755
    guard.canary_intact()
    await coord.aclose()


async def test_a_rewind_never_writes_through_a_link_made_after_the_merge(
    project: Path, canary: Path, backend: str
) -> None:
    """Sibling of the landing paths: rewinding to a pre-fork checkpoint restores the
    paths the merged branch touched (here ``out/keep.txt``). When ``out/`` has since
    become ``out -> canary`` (a later merge, a model, a third party), the restore refuses
    that path instead of writing it through the link into the canary."""
    (project / "out" / "keep.txt").write_text("keep\n")
    coord, views = await _fork(project, backend, "a", "b")
    (views["a"] / "out" / "keep.txt").write_text("changed by a\n")
    result = await coord.merge_or_select(MergeAction.pick("a"))
    await coord.flush()
    _swap_out_for_link(project, canary)
    guard = Guarded(canary, project)
    with pytest.raises(UnsafeChangeError, match="out is a symlink"):
        await coord.rewind_to_checkpoint(result.pre_fork_checkpoint_id)
    guard.unchanged()
    await coord.aclose()


async def test_combine_resolves_selected_paths_without_following_links(
    project: Path, canary: Path, backend: str
) -> None:
    coord, views = await _fork(project, backend, "a", "b")
    os.symlink(canary, views["a"] / "lnk")  # lnk -> /some/dir
    os.mkfifo(views["b"] / "pipe")
    guard = Guarded(canary, project)
    for selection in (
        {"lnk/target.txt": "a"},  # issue 22.3: read through the branch's link
        {"lnk/sub/deep.txt": "a"},
        {"lnk/target.txt": ["a:0"]},
        *({p: "a"} for p in path_shapes(canary).values()),
    ):
        with pytest.raises(CombineError):
            await coord.merge_or_select(MergeAction.combine(selection))
    with pytest.raises(UnsafeChangeError, match="FIFO"):
        await coord.merge_or_select(MergeAction.combine({"pipe": "b"}))
    guard.unchanged()
    assert not coord.is_resolved
    shutil.copy(sys.executable, views["b"] / "t")
    os.chmod(views["b"] / "t", 0o4755)
    await coord.merge_or_select(MergeAction.combine({"lnk": "a", "t": "b"}))
    assert os.readlink(project / "lnk") == str(canary)  # a link combines as a link
    assert stat.S_IMODE(os.lstat(project / "t").st_mode) == 0o755
    guard.canary_intact()
    await coord.aclose()


# -- 4. a sub-agent's landing ----------------------------------------------------------------
@pytest.mark.parametrize("stale", [False, True])
async def test_a_subagent_landing_strips_setuid_and_refuses_fifos(
    project: Path, canary: Path, backend: str, stale: bool
) -> None:
    ws = Workspace(project, backend=backend)
    guard = Guarded(canary, project)
    good, bad = ws.branch("good", on_success=None), ws.branch("bad", on_success=None)
    if stale:  # a sibling landed first: the per-path landing
        first = ws.branch("first", on_success=None)
        (Path(first.path) / "first.txt").write_text("1\n")
        await land_subagent(first)
        guard = Guarded(canary, project)
    os.mkfifo(Path(bad.path) / "pipe")
    (Path(bad.path) / "new.txt").write_text("would land\n")
    with pytest.raises(UnsafeChangeError, match="FIFO"):
        await land_subagent(bad)
    guard.unchanged()
    shutil.copy(sys.executable, Path(good.path) / "t")
    os.chmod(Path(good.path) / "t", 0o6755)
    os.symlink(canary / "target.txt", Path(good.path) / "notes.txt")
    landing = await land_subagent(good)
    assert landing.committed and landing.method == ("per_path" if stale else "commit")
    assert stat.S_IMODE(os.lstat(project / "t").st_mode) == 0o755
    assert os.readlink(project / "notes.txt") == str(canary / "target.txt")
    guard.canary_intact()
    ws.close()


# -- 5. an IDE save in the mirror -----------------------------------------------------------------
class _Mirror:
    def __init__(self, project: Path, backend: str) -> None:
        from branching_core.fork.mirror.materializer import ForkMaterializer

        self.ws = Workspace(project, backend=backend)
        self.branch = self.ws.branch("a", durable=True)
        self.mat = ForkMaterializer(project, "f-hostile")
        self.mat.add_branch("a", self.branch)
        self.refused: list[str] = []
        self.edited: list[str] = []
        self.conflicts: list[str] = []
        self.mat.on_edits = self._record
        self.mat.start()

    def _record(self, batch: Any) -> None:
        self.refused.extend(r.path for r in batch.refused)
        self.edited.extend(e.path for e in batch.edits)
        self.conflicts.extend(c.path for c in batch.conflicts)

    @property
    def view(self) -> Path:
        return Path(self.branch.path)

    def mirror(self, rel: str) -> Path:
        return self.mat.branch_path("a", rel)

    def close(self) -> None:
        self.mat.close()
        if self.branch.is_open:
            self.branch.abort()
        self.ws.close()


def _ide_saves(path: Path, text: str, how: str) -> None:
    """Save as an editor does: in place (open + truncate + write), or a temporary file
    renamed over the path."""
    if how == "in-place":
        try:
            with open(path, "w") as fh:
                fh.write(text)
        except OSError:
            pass  # the save failed (a dead link): the editor reports it
    else:
        tmp = path.with_name(f".{path.name}.swp-save")
        tmp.write_text(text)
        os.replace(tmp, path)


def _leaving_links(canary: Path) -> dict[str, str]:
    # from branches/<dir>/ five levels up is the project: in the mirror this relative link
    # pointed at the parent workspace's src/app.py; in the branch it leaves the branch
    return {"abs": str(canary / "target.txt"), "rel": "../../../../../src/app.py"}


@pytest.mark.parametrize("how", ["in-place", "rename"])
@pytest.mark.parametrize("link", ["abs", "rel"])
def test_an_ide_save_never_goes_through_a_branch_link_that_leaves_the_branch(
    project: Path, canary: Path, backend: str, how: str, link: str
) -> None:
    m = _Mirror(project, backend)
    try:
        guard = Guarded(canary, project)
        target = _leaving_links(canary)[link]
        os.symlink(target, m.view / "notes.txt")
        os.symlink("src/app.py", m.view / "alias.py")  # stays inside: kept as it is
        eventually(lambda: os.path.islink(m.mirror("notes.txt")), "the link mirrored")
        eventually(lambda: os.path.islink(m.mirror("alias.py")), "the inner link mirrored")
        shown = os.readlink(m.mirror("notes.txt"))
        assert shown.startswith(DEAD_LINK_DIR + "/") and shown != target
        assert os.readlink(m.mirror("alias.py")) == "src/app.py"
        _ide_saves(m.mirror("notes.txt"), "saved by the user\n", how)
        if how == "rename":
            eventually(lambda: "notes.txt" in m.refused, "the save refused")
        else:
            time.sleep(0.3)  # give a wrong write-back the chance to happen
        assert os.readlink(m.view / "notes.txt") == target  # the branch keeps its link
        guard.unchanged()  # neither the canary nor the parent's src/app.py changed
    finally:
        m.close()


def test_an_ide_save_never_lands_below_a_branch_directory_link(
    project: Path, canary: Path, backend: str
) -> None:
    """The branch turned ``src/`` into ``src -> canary`` after the user's mirror had it as
    a directory: the user's save of ``src/target.txt`` is refused (or, when the mirror's
    sync of the link comes first, kept aside as a conflict), never written there."""
    m = _Mirror(project, backend)
    try:
        (m.view / "src" / "app.py").write_text("VALUE = 2\n")
        eventually(lambda: m.mirror("src/app.py").exists(), "src/app.py mirrored")
        shutil.rmtree(m.view / "src")
        os.symlink(canary, m.view / "src")
        guard = Guarded(canary, project)
        m.mirror("src").mkdir(exist_ok=True)
        m.mirror("src/target.txt").write_text("pwned\n")
        eventually(
            lambda: "src/target.txt" in m.refused + m.conflicts, "the save refused or kept"
        )
        assert "src/target.txt" not in m.edited
        assert os.readlink(m.view / "src") == str(canary)
        guard.unchanged()
    finally:
        m.close()


def test_an_ide_save_lands_without_setuid(project: Path, canary: Path, backend: str) -> None:
    m = _Mirror(project, backend)
    try:
        (m.view / "README.txt").write_text("branch\n")
        eventually(lambda: m.mirror("README.txt").exists(), "README mirrored")
        guard = Guarded(canary, project)
        tmp = m.mirror("README.txt").with_name(".README.txt.new")
        tmp.write_text("user\n")
        os.chmod(tmp, 0o4755)
        os.replace(tmp, m.mirror("README.txt"))
        eventually(lambda: "README.txt" in m.edited, "the save applied")
        assert (m.view / "README.txt").read_text() == "user\n"
        assert stat.S_IMODE(os.lstat(m.view / "README.txt").st_mode) == 0o755
        guard.unchanged()  # the parent is not touched by an edit of the branch
    finally:
        m.close()


# -- 6. the CLI: a sandboxed command's branch, committed -----------------------------------------
def _cli_run(project: Path, script: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "branching_core.cli", "run", "-w", str(project), "--", "sh",
         "-c", script],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )


@needs_root
def test_cli_run_lands_a_sandboxed_setuid_copy_without_its_bits(
    project: Path, canary: Path
) -> None:
    guard = Guarded(canary, project)
    proc = _cli_run(project, f"cp /bin/true t; chmod 4755 t; chmod 2755 README.txt; "
                             f"ln -s {canary}/target.txt notes.txt")
    assert proc.returncode == 0, proc.stderr
    st = os.lstat(project / "t")
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(project / "README.txt").st_mode) == 0o755
    assert os.readlink(project / "notes.txt") == f"{canary}/target.txt"
    guard.canary_intact()


def test_cli_run_refuses_a_fifo_and_applies_nothing(project: Path, canary: Path) -> None:
    guard = Guarded(canary, project)
    proc = _cli_run(project, "echo new > new.txt; mkfifo pipe")
    assert proc.returncode != 0
    assert "FIFO" in proc.stderr
    guard.unchanged()


# -- the one predicate --------------------------------------------------------------------------
def test_internal_paths_and_path_problems() -> None:
    assert is_internal_path(".pydantic-deep") and is_internal_path(".pydantic-deep/x/y")
    assert is_internal_path(".forkdeck-stores/s")
    assert not is_internal_path("src/.pydantic-deep") and not is_internal_path("a.txt")
    for bad in ("", "/abs", "a/../b", "..", "./a", "a//b", "a\0b", "x/" * 3000, "a" * 300):
        assert path_problem(bad) is not None, bad
    assert path_problem("src/app.py") is None and path_problem("é/ü .txt") is None


async def test_merge_actions_parse_in_one_place() -> None:
    assert MergeAction.parse(" pick: a ") == MergeAction.pick("a")
    assert MergeAction.parse("abort") == MergeAction.abort()
    assert str(MergeAction.pick("b")) == "pick:b"
    with pytest.raises(ValueError, match="unknown action"):
        MergeAction.parse("merge a")
    with pytest.raises(ValueError, match="label"):
        MergeAction.parse("pick:")


async def test_a_typed_git_commit_request_commits_exactly_the_landed_paths(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``MergeAction.pick(label, git_commit=GitCommitRequest(...))`` is the typed spelling
    of ``--git-commit``: the winner lands, then exactly its paths are committed."""
    import subprocess

    from branching_core.fork import GitCommitRequest

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(project), *args], check=True,
                              capture_output=True, text=True).stdout.strip()

    for who in ("AUTHOR", "COMMITTER"):  # an identity for a user without a git config
        monkeypatch.setenv(f"GIT_{who}_NAME", "t")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "t@example.com")
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-qm", "base")
    before = git("rev-parse", "HEAD")
    (project / "README.txt").write_text("the user's own unstaged edit\n")
    coord, views = await _fork(project, "copy", "a", "b")
    (views["a"] / "src" / "app.py").write_text("VALUE = 2\n")
    result = await coord.merge_or_select(
        MergeAction.pick("a", git_commit=GitCommitRequest(message="typed merge"))
    )
    assert not result.conflicts and not result.errors
    assert git("rev-parse", "HEAD~1") == before
    assert git("log", "-1", "--format=%s") == "typed merge"
    assert git("diff", "--name-only", "HEAD~1", "HEAD") == "src/app.py"
    assert git("status", "--porcelain") == "M README.txt"  # still the user's, unstaged
    await coord.aclose()

