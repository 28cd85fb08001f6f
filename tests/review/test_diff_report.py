"""build_diff_report on real overlay workspaces, branches changed by real agent runs."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import cast

import pytest

from branching_core.review import BranchDiffReport, build_diff_report
from branching_core.review.diff_report import MAX_DIFF_LINES
from branching_core.workspace import Workspace
from tests.support.typed import view_of

from .forks import call, fork_with, project, runner

__all__ = ["project", "runner"]


@pytest.fixture(params=["auto", "copy"])
def ws(request: pytest.FixtureRequest, project: Path) -> Workspace:
    """Every behaviour on the automatic backend (overlay here) and on plain copies."""
    return Workspace(project, backend=request.param)


async def test_agreement_labels_and_score(ws: Workspace, project: Path) -> None:
    coord = await fork_with(
        ws,
        {
            "a": [
                call("write_file", path="src/app.py", content="VALUE = 2\n"),
                call("write_file", path="a_only.txt", content="a\n"),
            ],
            "b": [
                call("write_file", path="src/app.py", content="VALUE = 2\n"),
                call("write_file", path="README.txt", content="hello from b\n"),
            ],
            "c": [
                call("write_file", path="src/app.py", content="VALUE = 3\n"),
                call("write_file", path="README.txt", content="hello from c\n"),
            ],
        },
    )
    report = build_diff_report(cast(str, coord.fork_id), list(coord.branches.values()))
    assert isinstance(report, BranchDiffReport) and report.fork_id == coord.fork_id
    assert [p.path for p in report.paths] == ["README.txt", "a_only.txt", "src/app.py"]
    assert {p.path: p.agreement for p in report.paths} == {
        "README.txt": "split",
        "a_only.txt": "unique",
        "src/app.py": "split",
    }
    ids = {rt.label: rt.branch_id for rt in coord.branches.values()}
    app = report.path("src/app.py")
    assert app is not None and app.parent_content == "VALUE = 1\n" and app.parent_exists
    assert set(app.branches) == set(ids.values())  # one entry per branch, keyed by id
    assert app.branches[ids["a"]].operation == "modified"
    assert app.branches[ids["a"]].new_content == "VALUE = 2\n"
    assert app.branches[ids["a"]].unified_diff_vs_parent == (
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 2\n"
    )
    only = report.path("a_only.txt")
    assert only is not None and only.parent_content is None and not only.parent_exists
    assert only.branches[ids["a"]].operation == "created"
    assert only.branches[ids["b"]].operation == "untouched"
    s = report.summary
    assert (s.total_paths_touched, s.split_paths, s.unique_paths) == (3, 2, 1)
    assert s.agreement_score == pytest.approx(1 - 2 / 3)
    assert s.per_branch_unique == {ids["a"]: 1, ids["b"]: 0, ids["c"]: 0}
    assert s.per_branch_touched == {ids["a"]: 2, ids["b"]: 2, ids["c"]: 2}
    assert [c.path for c in report.changes_of("a")] == ["a_only.txt", "src/app.py"]
    assert report.changes_of(ids["b"]) == report.changes_of("b")
    # the coordinator's thin method gives the same report
    same = coord.diff_report()
    assert [(p.path, p.agreement) for p in same.paths] == [
        (p.path, p.agreement) for p in report.paths
    ]
    await coord.abort_fork()


async def test_identical_changes_are_unanimous_and_share_one_diff(ws: Workspace) -> None:
    coord = await fork_with(
        ws,
        {label: [call("write_file", path="src/app.py", content="VALUE = 9\n")] for label in "abc"},
    )
    report = coord.diff_report()
    (entry,) = report.paths
    assert entry.agreement == "unanimous_change"
    diffs = [c.unified_diff_vs_parent for c in entry.branches.values()]
    assert diffs[0] is diffs[1] is diffs[2]  # computed once, shared
    assert report.summary.agreement_score == 1.0
    assert report.summary.unanimous_change_paths == 1
    await coord.abort_fork()


async def test_rename_is_one_change_not_delete_plus_create(
    ws: Workspace, project: Path, runner
) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "guide.md").write_text("# Guide\nline\n")
    coord = await fork_with(
        ws,
        {
            "mover": [call("run_command", command="mv docs/guide.md docs/manual.md")],
            "editor": [call("write_file", path="docs/guide.md", content="# Guide v2\n")],
        },
        runner=runner,
    )
    ids = {rt.label: rt.branch_id for rt in coord.branches.values()}
    report = coord.diff_report()
    manual = report.path("docs/manual.md")
    assert manual is not None
    change = manual.branches[ids["mover"]]
    assert change.operation == "renamed" and change.old_path == "docs/guide.md"
    assert change.unified_diff_vs_parent == (
        "rename from docs/guide.md\nrename to docs/manual.md\n"
    )
    assert manual.agreement == "unique"
    # The old path is contested (the editor changed it): shown with the rename, as a split.
    guide = report.path("docs/guide.md")
    assert guide is not None and guide.agreement == "split"
    assert guide.branches[ids["mover"]].operation == "renamed"
    assert guide.branches[ids["editor"]].operation == "modified"
    assert not any(
        c.operation in ("deleted", "created") for p in report.paths for c in p.branches.values()
    )
    assert report.summary.renamed_paths == 1
    assert report.summary.per_branch_touched[ids["mover"]] == 1
    await coord.abort_fork()


async def test_rename_with_edit_is_not_a_rename(ws: Workspace, project: Path, runner) -> None:
    coord = await fork_with(
        ws,
        {
            "x": [
                call(
                    "run_command", command="mv src/app.py src/main.py && echo '# x' >> src/main.py"
                )
            ]
        },
        runner=runner,
    )
    ops = {p.path: next(iter(p.branches.values())).operation for p in coord.diff_report().paths}
    assert ops == {"src/app.py": "deleted", "src/main.py": "created"}
    await coord.abort_fork()


async def test_binary_placeholder_has_size_and_sha256(ws: Workspace, runner) -> None:
    blob = b"PNG\x00\x01\x02" * 100
    digest = hashlib.sha256(blob).hexdigest()
    command = "for i in $(seq 100); do printf 'PNG\\000\\001\\002'; done > logo.bin"
    coord = await fork_with(ws, {"bin": [call("run_command", command=command)]}, runner=runner)
    rt = coord.get_branch("bin")
    assert (view_of(rt) / "logo.bin").read_bytes() == blob
    report = coord.diff_report()
    entry = report.path("logo.bin")
    assert entry is not None
    change = entry.branches[rt.branch_id]
    assert change.is_binary and change.new_content is None
    assert change.size == 600 and change.sha256 == digest
    assert change.unified_diff_vs_parent == f"[binary · 600 bytes · sha256:{digest[:12]}]"
    assert report.summary.binary_paths == 1
    await coord.abort_fork()


async def test_large_diff_keeps_head_and_tail(ws: Workspace, project: Path) -> None:
    old = "".join(f"line {i}\n" for i in range(2000))
    (project / "big.txt").write_text(old)
    new = "".join(f"LINE {i}\n" for i in range(2000))
    coord = await fork_with(ws, {"big": [call("write_file", path="big.txt", content=new)]})
    change = coord.diff_report().paths[0].branches[coord.get_branch("big").branch_id]
    diff = change.unified_diff_vs_parent
    lines = diff.splitlines()
    assert len(lines) == MAX_DIFF_LINES + 1  # head + marker + tail
    total = 3 + 4000  # ---/+++/@@ header plus every old and new line
    assert f"... [{total - MAX_DIFF_LINES} lines truncated] ..." in diff
    assert lines[0] == "--- a/big.txt" and lines[-1] == "+LINE 1999"
    assert change.diff_lines_truncated == total - MAX_DIFF_LINES
    assert change.new_content == new  # the content itself is never cut
    await coord.abort_fork()


async def test_paths_filter(ws: Workspace, project: Path) -> None:
    coord = await fork_with(
        ws,
        {
            "a": [
                call("write_file", path="src/app.py", content="VALUE = 2\n"),
                call("write_file", path="notes.txt", content="n\n"),
            ],
            "b": [call("write_file", path="src/extra.py", content="X = 1\n")],
        },
    )
    runtimes = list(coord.branches.values())
    report = build_diff_report(cast(str, coord.fork_id), runtimes, ["src", "README.txt"])
    assert {p.path: p.agreement for p in report.paths} == {
        "README.txt": "unanimous_no_change",  # asked for, touched by none: still shown
        "src/app.py": "unique",
        "src/extra.py": "unique",
    }
    readme = report.path("README.txt")
    assert readme is not None and readme.parent_content == "hello\n"
    assert all(c.operation == "untouched" for c in readme.branches.values())
    assert report.summary.total_paths_touched == 2
    assert report.summary.unanimous_no_change_paths == 1
    with pytest.raises(ValueError, match="must be relative"):
        build_diff_report(cast(str, coord.fork_id), runtimes, ["../etc/passwd"])
    with pytest.raises(ValueError, match="must be relative"):
        build_diff_report(cast(str, coord.fork_id), runtimes, ["/etc/passwd"])
    await coord.abort_fork()


async def test_deleted_directory_lists_its_files(ws: Workspace, project: Path, runner) -> None:
    (project / "old").mkdir()
    (project / "old" / "one.txt").write_text("1\n")
    (project / "old" / "two.txt").write_text("2\n")
    coord = await fork_with(ws, {"rm": [call("run_command", command="rm -r old")]}, runner=runner)
    report = coord.diff_report()
    ops = {p.path: next(iter(p.branches.values())).operation for p in report.paths}
    assert ops == {"old/one.txt": "deleted", "old/two.txt": "deleted"}
    assert report.paths[0].branches[coord.get_branch("rm").branch_id].unified_diff_vs_parent == (
        "--- a/old/one.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-1\n"
    )
    await coord.abort_fork()


async def test_merged_branches_are_skipped(ws: Workspace, project: Path) -> None:
    coord = await fork_with(
        ws,
        {
            "a": [call("write_file", path="a.txt", content="a\n")],
            "b": [call("write_file", path="b.txt", content="b\n")],
        },
    )
    runtimes = list(coord.branches.values())
    await coord.merge_or_select("pick:a")
    report = build_diff_report(cast(str, coord.fork_id), runtimes, parent_path=project)
    assert report.paths == [] and report.labels == {}
