# ruff: noqa: E501
"""The live fork mirror: real overlay/copy branches, the real sandbox, real processes.

Nothing is faked: branches are ``Workspace`` branches, shell commands run in the sandbox
(``sed -i`` never goes through a write tool), agents are pydantic-ai ``Agent``s driven by
``FunctionModel``, and the crash test SIGKILLs a real child process. Waiting uses
:func:`eventually` (poll until true, generous deadline): no test asserts a duration.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, UserPromptPart

from branching_core.fork import BranchSpec
from branching_core.fork.mirror.materializer import ForkMaterializer, MirrorError
from branching_core.fork.mirror.recovery import recover_mirrors
from branching_core.live import ForkCoordinator, LiveForkCapability
from branching_core.review.editor import EditorDetector
from branching_core.sandbox import run_command
from branching_core.workspace import Workspace
from tests.fork.helpers import Scripted, call
from tests.support.killed_child import run_until_ready_then_kill
from tests.support.typed import view_of


def eventually(check: Callable[[], bool], what: str, deadline: float = 15.0) -> None:
    """Poll ``check`` until it holds (the mirror is asynchronous); fail with ``what``."""
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


async def aeventually(check: Callable[[], bool], what: str, deadline: float = 15.0) -> None:
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def files_under(root: Path) -> dict[str, str]:
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.txt").write_text("hello\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("VALUE = 1\n")
    (root / "src" / "util.py").write_text("def f():\n    return 1\n")
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("a\n")
    (root / "docs" / "b.md").write_text("b\n")
    return root


# -- workspace branches + materializer ----------------------------------------------------------


def test_tool_writes_and_sandboxed_sed_are_mirrored_with_fork_time_parent(project: Path) -> None:
    ws = Workspace(project)
    assert ws.fstype == "overlay"
    a, b = ws.branch("a", durable=True), ws.branch("b", durable=True)
    mat = ForkMaterializer(project, "f1")
    mat.add_branch("approach_a", a)
    mat.add_branch("approach b", b)  # a label that is not a safe directory name
    mat.start()
    try:
        (a.path / "src" / "app.py").write_text("VALUE = 2\n")  # what a write tool does
        result = run_command("sed -i 's/return 1/return 42/' src/util.py", b.path)
        assert result.exit_code == 0, result.stderr
        util_b = mat.branch_path("approach b", "src/util.py")
        app_a = mat.branch_path("approach_a", "src/app.py")
        eventually(lambda: read(util_b) == "def f():\n    return 42\n", "sed -i mirrored")
        eventually(lambda: read(app_a) == "VALUE = 2\n", "tool write mirrored")
        assert mat.branch_dir("approach b").name == "approach-b"
        # parent/ holds the fork-time version of exactly the touched paths (a sibling's
        # paths are filled in by a later sync than the branch's own write: wait for them)
        parent_want = {"src/app.py": "VALUE = 1\n", "src/util.py": "def f():\n    return 1\n"}
        eventually(lambda: files_under(mat.parent_dir) == parent_want, "parent/ filled")
        # a path only the sibling changed holds the parent's bytes, so a directory diff of
        # parent/ against branches/approach_a/ shows approach_a's changes and nothing else
        a_want = {"src/app.py": "VALUE = 2\n", "src/util.py": "def f():\n    return 1\n"}
        eventually(lambda: files_under(mat.branch_dir("approach_a")) == a_want, "a filled")
        assert mat.touched_paths() == ["src/app.py", "src/util.py"]
        # the parent itself is untouched and the mirror is invisible to every branch
        assert (project / "src" / "util.py").read_text() == "def f():\n    return 1\n"
        assert not (a.path / ".pydantic-deep").exists()
        assert a.changes().all_paths == ["src/app.py"]
        assert b.changes().all_paths == ["src/util.py"]
    finally:
        mat.close()
    assert not mat.parent_dir.exists() and not mat.branches_dir.exists()
    assert not (mat.fork_dir / "mirror.json").exists()


def test_deletions_creations_and_reverts_follow_the_branch(project: Path) -> None:
    ws = Workspace(project)
    a = ws.branch("a", durable=True)
    mat = ForkMaterializer(project, "f2")
    mat.add_branch("a", a)
    mat.start()
    try:
        script = "rm README.txt && rm -r docs && mkdir -p new/deep && echo made > new/deep/f.txt"
        assert run_command(script, a.path).exit_code == 0
        mirror = mat.branch_dir("a")
        eventually(lambda: read(mirror / "new/deep/f.txt") == "made\n", "new tree mirrored")
        eventually(
            lambda: (
                mat.touched_paths() == ["README.txt", "docs/a.md", "docs/b.md", "new/deep/f.txt"]
            ),
            "deletions recorded",
        )
        # deleted: the parent's version is there, the branch's is not
        assert files_under(mat.parent_dir) == {
            "README.txt": "hello\n",
            "docs/a.md": "a\n",
            "docs/b.md": "b\n",
        }
        assert files_under(mirror) == {"new/deep/f.txt": "made\n"}

        # a file rewritten with its original bytes is no change: both copies go away
        (a.path / "src" / "app.py").write_text("VALUE = 3\n")
        eventually(lambda: read(mirror / "src/app.py") == "VALUE = 3\n", "modification mirrored")
        (a.path / "src" / "app.py").write_text("VALUE = 1\n")
        eventually(lambda: not (mirror / "src").exists(), "revert mirrored")
        assert not (mat.parent_dir / "src").exists()

        # a deleted file that comes back with other content is a modification
        (a.path / "README.txt").write_text("hello again\n")
        eventually(
            lambda: read(mirror / "README.txt") == "hello again\n", "re-created file mirrored"
        )
        assert read(mat.parent_path("README.txt")) == "hello\n"
    finally:
        mat.close()


def test_copy_backend_branch_directory_is_watched(project: Path) -> None:
    ws = Workspace(project, backend="copy")
    a = ws.branch("a", durable=True)
    mat = ForkMaterializer(project, "f3")
    mat.add_branch("a", a)
    mat.start()
    try:
        (a.path / "docs" / "a.md").write_text("changed\n")
        assert run_command("rm docs/b.md && echo n > added.txt", a.path).exit_code == 0
        eventually(
            lambda: (
                files_under(mat.branch_dir("a")) == {"docs/a.md": "changed\n", "added.txt": "n\n"}
            ),
            "copy-backend writes mirrored",
        )
        eventually(
            lambda: mat.touched_paths() == ["added.txt", "docs/a.md", "docs/b.md"],
            "delete recorded",
        )
        assert files_under(mat.parent_dir) == {"docs/a.md": "a\n", "docs/b.md": "b\n"}
    finally:
        mat.close()


def test_start_reconciles_what_happened_before_and_second_owner_is_refused(project: Path) -> None:
    ws = Workspace(project)
    a = ws.branch("a", durable=True)
    (a.path / "early.txt").write_text("before the mirror started\n")
    mat = ForkMaterializer(project, "f4")
    mat.add_branch("a", a)
    mat.start()
    try:
        assert read(mat.branch_path("a", "early.txt")) == "before the mirror started\n"
        other = ForkMaterializer(project, "f4")
        other.add_branch("a", a)
        with pytest.raises(MirrorError, match="already mirrored by a live process"):
            other.start()
        # a live mirror is never taken for an orphan
        assert recover_mirrors(project).live == ["f4"]
        assert mat.branch_path("a", "early.txt").exists()
    finally:
        mat.close()


def test_ten_branches_one_watcher(project: Path) -> None:
    ws = Workspace(project)
    branches = [ws.branch(f"b{i}", durable=True) for i in range(10)]
    mat = ForkMaterializer(project, "f5")
    for i, br in enumerate(branches):
        mat.add_branch(f"b{i}", br)
    mat.start()
    try:
        for i, br in enumerate(branches):
            (br.path / "src" / "app.py").write_text(f"VALUE = {i + 10}\n")
        for i in range(10):
            path = mat.branch_path(f"b{i}", "src/app.py")
            eventually(
                lambda p=path, i=i: read(p) == f"VALUE = {i + 10}\n", f"branch b{i} mirrored"
            )
        assert read(mat.parent_path("src/app.py")) == "VALUE = 1\n"
        assert sum(t.name.startswith("fork-mirror-") for t in threading.enumerate()) == 1
    finally:
        mat.close()


# -- coordinator integration ------------------------------------------------------------------------


def _agent(scripts: dict[str, list[Any]]) -> Agent:
    return Agent(Scripted(scripts).model)


PARENT = [ModelRequest(parts=[UserPromptPart("parent")])]


async def test_coordinator_mirrors_every_writer_and_cleans_on_merge(project: Path) -> None:
    agent = _agent(
        {
            "A": [
                call("write_file", path="src/app.py", content="VALUE = 'a'\n"),
                call("run_command", command="sed -i 's/hello/hi from a/' README.txt"),
            ],
            "B": [call("run_command", command="rm docs/a.md && echo x > docs/c.md")],
        }
    )
    coord = ForkCoordinator(agent, workspace=project, materialize=True)
    handle = await coord.fork([BranchSpec("a", "A"), BranchSpec("b", "B")], parent_history=PARENT)
    await coord.wait(timeout=60)
    mat = coord.mirror_hook.materializer
    assert mat is not None and mat.fork_id == handle.fork_id
    await aeventually(
        lambda: (
            files_under(mat.branch_dir("a"))
            == {"src/app.py": "VALUE = 'a'\n", "README.txt": "hi from a\n", "docs/a.md": "a\n"}
        ),
        "branch a (tool + sandboxed sed) mirrored",
    )
    await aeventually(
        lambda: files_under(mat.branch_dir("b"))
        == {"docs/c.md": "x\n", "src/app.py": "VALUE = 1\n", "README.txt": "hello\n"},
        "branch b mirrored (its deletion absent, its siblings' paths at the parent's version)",
    )
    assert files_under(mat.parent_dir) == {
        "src/app.py": "VALUE = 1\n",
        "README.txt": "hello\n",
        "docs/a.md": "a\n",
    }
    fork_dir = coord.store.fork_dir(handle.fork_id)
    assert mat.fork_dir == fork_dir and (fork_dir / "manifest.json").exists()

    result = await coord.merge_or_select("pick:a")
    assert sorted(result.applied_paths) == ["README.txt", "src/app.py"]
    # the merge committed the branch's files only, never the mirror
    assert not (project / "branches").exists() and not (project / "parent").exists()
    assert (project / "README.txt").read_text() == "hi from a\n"
    # the mirror is gone, the fork store's files (rewind needs them) are not
    assert not (fork_dir / "parent").exists() and not (fork_dir / "branches").exists()
    assert (fork_dir / "manifest.json").exists() and (fork_dir / "history").is_dir()
    assert coord.mirror_hook.materializer is None and not mat.watching


async def test_keep_artifacts_keeps_the_mirror_after_abort(project: Path) -> None:
    agent = _agent({"A": [call("write_file", path="notes.txt", content="kept\n")]})
    coord = ForkCoordinator(agent, workspace=project, materialize=True, keep_artifacts=True)
    handle = await coord.fork([BranchSpec("a", "A")], parent_history=PARENT)
    await coord.wait(timeout=60)
    await coord.merge_or_select("abort")
    fork_dir = coord.store.fork_dir(handle.fork_id)
    assert files_under(fork_dir / "branches" / "a") == {"notes.txt": "kept\n"}
    info = json.loads((fork_dir / "mirror.json").read_text())
    assert info["state"] == "kept" and info["keep_artifacts"] is True
    # a restart keeps what the user asked to keep
    report = recover_mirrors(project)
    assert report.kept == [handle.fork_id] and (fork_dir / "branches" / "a" / "notes.txt").exists()


async def test_nested_fork_is_mirrored_against_the_outer_branch(project: Path) -> None:
    agent = _agent({"A": [call("write_file", path="src/app.py", content="VALUE = 'outer'\n")]})
    coord = ForkCoordinator(agent, workspace=project, materialize=True)
    await coord.fork([BranchSpec("outer", "A")], parent_history=PARENT)
    await coord.wait(timeout=60)
    inner_agent = _agent(
        {"I": [call("write_file", path="src/app.py", content="VALUE = 'inner'\n")]}
    )
    inner = coord.nested("outer")
    inner.agent = inner_agent
    assert inner.mirror_hook is not None
    await inner.fork([BranchSpec("deep", "I")], parent_history=PARENT)
    await inner.wait(timeout=60)
    mat = inner.mirror_hook.materializer
    await aeventually(
        lambda: read(mat.branch_path("deep", "src/app.py")) == "VALUE = 'inner'\n", "inner mirrored"
    )
    # the inner fork's parent is the outer branch: its fork-time version is the outer write
    assert read(mat.parent_path("src/app.py")) == "VALUE = 'outer'\n"
    await coord.merge_or_select("abort")
    assert not mat.branches_dir.exists()


@dataclass
class Deps:
    fork_coordinator: Any = None


async def test_capability_wires_materialize_and_keep_artifacts(project: Path) -> None:
    s = Scripted(
        {
            "P": [
                call("fork_run", specs=[{"label": "x", "steer": "X"}]),
                call("wait_branches", timeout=30),
                call("merge_or_select", action="pick:x"),
            ],
            "X": [call("run_command", command="sed -i s/hello/agent/ README.txt")],
        }
    )
    cap = LiveForkCapability(workspace=project, materialize=True, keep_artifacts=True)
    deps = Deps()
    await Agent(s.model, capabilities=[cap]).run("P", deps=deps)
    coord = deps.fork_coordinator
    assert coord.is_resolved and (project / "README.txt").read_text() == "agent\n"
    # the mirror of the agent-driven fork was kept after its merge, as asked
    fork_dir = coord.store.fork_dir(coord.fork_id)
    assert files_under(fork_dir / "branches") == {"x/README.txt": "agent\n"}
    assert files_under(fork_dir / "parent") == {"README.txt": "hello\n"}


# -- a killed process ------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from branching_core.fork import BranchSpec
    from branching_core.live import ForkCoordinator, LiveForkCapability
    from branching_core.workspace import Workspace
    from tests.fork.helpers import Scripted, call

    async def main():
        s = Scripted({
            "A": [call("write_file", path="src/app.py", content="VALUE = 'a'\\n"), call("hang")],
            "B": [call("run_command", command="sed -i s/hello/sed-b/ README.txt"), call("hang")],
        })
        agent = Agent(s.model)

        @agent.tool_plain
        async def hang() -> str:
            await asyncio.Event().wait()
            return "never"

        coord = ForkCoordinator(agent, workspace=Workspace(sys.argv[1]), materialize=True)
        await coord.fork([BranchSpec("a", "A"), BranchSpec("b", "B")],
                         parent_history=[ModelRequest(parts=[UserPromptPart("parent")])])
        mat = coord.mirror_hook.materializer
        want = {("a", "src/app.py"): "VALUE = 'a'\\n", ("a", "README.txt"): "hello\\n",
                ("b", "README.txt"): "sed-b\\n", ("b", "src/app.py"): "VALUE = 1\\n"}

        def mirrored(label, rel, text):
            path = mat.branch_path(label, rel)
            return path.exists() and path.read_text() == text

        # READY only once every captured path is mirrored in both branch directories (the
        # sibling's paths are filled in by a later sync than the branch's own write)
        while not all(mirrored(label, rel, text) for (label, rel), text in want.items()):
            await asyncio.sleep(0.01)
        mat.flush()  # (its stamps are saved: what the mirror wrote is known after the kill)
        await coord.flush()
        print("READY", coord.fork_id, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def _fork_and_kill(project: Path) -> str:
    return run_until_ready_then_kill(CHILD, str(project))


async def test_killed_process_mirror_is_rebuilt_and_watched_again(project: Path) -> None:
    fork_id = _fork_and_kill(project)
    fork_dir = project / ".pydantic-deep" / "forks" / fork_id
    # the killed process left its mirror (and its lock file) behind
    assert files_under(fork_dir / "branches") == {
        "a/src/app.py": "VALUE = 'a'\n",
        "a/README.txt": "hello\n",
        "b/README.txt": "sed-b\n",
        "b/src/app.py": "VALUE = 1\n",
    }
    # a file the mirror does not know, in a directory of a branch that is gone
    (fork_dir / "branches" / "gone" ).mkdir()
    (fork_dir / "branches" / "gone" / "stale.txt").write_text("not in any branch\n")

    [coord] = ForkCoordinator.recover(project, _agent({}), materialize=True)
    mat = coord.mirror_hook.materializer
    assert mat is not None and mat.watching and mat.fork_id == fork_id
    # rebuilt from the branches: the stale directory is gone, the real changes are there
    # (a file the user saves in a live branch's directory meanwhile is theirs: see
    # test_ide_edits_recovery.py)
    assert not (fork_dir / "branches" / "gone").exists()
    assert files_under(mat.branch_dir("a")) == {
        "src/app.py": "VALUE = 'a'\n",
        "README.txt": "hello\n",
    }
    assert files_under(mat.parent_dir) == {"src/app.py": "VALUE = 1\n", "README.txt": "hello\n"}
    # ... and it is live again: a sandboxed command on the recovered branch shows up
    b_path = view_of(coord.get_branch("b"))
    assert run_command("sed -i s/sed-b/sed-b-again/ README.txt", b_path).exit_code == 0
    await aeventually(
        lambda: read(mat.branch_path("b", "README.txt")) == "sed-b-again\n", "post-recovery write"
    )

    await coord.merge_or_select("abort")
    assert not (fork_dir / "branches").exists() and not (fork_dir / "parent").exists()
    assert (fork_dir / "manifest.json").exists()


def test_killed_process_mirror_without_branches_is_cleaned(project: Path, tmp_path: Path) -> None:
    fork_id = _fork_and_kill(project)
    fork_dir = project / ".pydantic-deep" / "forks" / fork_id
    assert (fork_dir / "branches" / "a" / "src" / "app.py").exists()
    # the branch store is gone (e.g. a cleared cache): the mirror can no longer be trusted
    subprocess.run(["rm", "-rf", str(tmp_path / "_stores")], check=True)
    report = recover_mirrors(project)
    assert report.cleaned == [fork_id] and report.rebuilt == []
    assert not (fork_dir / "branches").exists() and not (fork_dir / "parent").exists()
    assert not (fork_dir / "mirror.json").exists()
    assert (fork_dir / "manifest.json").exists()  # the fork store's files stay


# -- the diff tool opens the whole mirrored fork -------------------------------------------------

RECORDER = """\
import json, os, sys
listing = {a: sorted(os.path.relpath(os.path.join(d, f), a) for d, _, fs in os.walk(a) for f in fs) for a in sys.argv[1:]}
with open(os.environ["DIFF_RECORD"], "w") as fh:
    json.dump({"argv": sys.argv[1:], "listing": listing}, fh)
"""


def test_custom_difftool_opens_the_mirrored_fork_directories(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace(project)
    a, b = ws.branch("a", durable=True), ws.branch("b", durable=True)
    mat = ForkMaterializer(project, "f6")
    mat.add_branch("a", a)
    mat.add_branch("b", b)
    mat.start()
    try:
        (a.path / "src" / "app.py").write_text("VALUE = 'a'\n")
        assert run_command("echo b > new.txt", b.path).exit_code == 0
        eventually(
            lambda: mat.touched_paths() == ["new.txt", "src/app.py"], "both branches mirrored"
        )
        script = tmp_path / "record diff.py"  # a space: the template must quote it
        script.write_text(RECORDER)
        record = tmp_path / "record.json"
        template = (
            f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {{parent}} {{branches}}"
        )
        monkeypatch.delenv("PYDANTIC_DEEP_DIFFTOOL", raising=False)
        monkeypatch.setenv("FORKDECK_DIFFTOOL", template)
        monkeypatch.setenv("DIFF_RECORD", str(record))
        kind = EditorDetector.detect()
        assert kind == "custom"
        dirs = [mat.branch_dir("a"), mat.branch_dir("b")]
        [proc] = EditorDetector.invoke(kind, mat.parent_dir, dirs)
        assert proc.wait(30) == 0
        got = json.loads(record.read_text())
        assert got["argv"] == [str(mat.parent_dir), str(dirs[0]), str(dirs[1])]
        assert got["listing"] == {
            str(mat.parent_dir): ["src/app.py"],
            str(dirs[0]): ["src/app.py"],
            str(dirs[1]): ["new.txt", "src/app.py"],
        }
        # VS Code's directory mode turns the same dirs into per-file commands
        cmds = EditorDetector.build_commands("vscode", mat.parent_dir, [dirs[0]], executable="code")
        assert cmds == [
            ["code", "--diff", str(mat.parent_dir / "src/app.py"), str(dirs[0] / "src/app.py")]
        ]
        cmds = EditorDetector.build_commands("pycharm", mat.parent_dir, dirs, executable="pycharm")
        assert cmds == [["pycharm", "diff", str(mat.parent_dir), str(d)] for d in dirs]
    finally:
        mat.close()
