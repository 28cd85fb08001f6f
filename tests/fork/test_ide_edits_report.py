"""Issue 17.2, follow-ups: the user's mirror edits in the headless diff report (what the
model's ``diff_branches`` and the judge read), and a conflict an on-demand flush finds is
reported at once.

Real parts only: overlay ``Workspace`` branches, the real ``watchfiles`` mirror, real
pydantic-ai ``Agent``s on ``FunctionModel``. Waits poll with a generous deadline.
"""

from __future__ import annotations

from pathlib import Path

from branching_core.fork import BranchEditConflict, BranchUserEdited
from branching_core.review.judge import format_report
from tests.fork.helpers import Scripted, call
from tests.fork.test_ide_edits import mirrored_fork, project
from tests.fork.test_mirror import aeventually, read

__all__ = ["project"]


async def test_the_diff_report_marks_the_paths_the_user_edited(project: Path) -> None:
    s = Scripted(
        {
            "A": [call("write_file", path="src/app.py", content="VALUE = 'a'\n")],
            "B": [call("write_file", path="src/app.py", content="VALUE = 'b'\n")],
        }
    )
    coord, events, mat = await mirrored_fork(project, s, "a", "b")
    await aeventually(
        lambda: read(mat.branch_path("a", "src/app.py")) == "VALUE = 'a'\n", "mirrored"
    )
    mat.branch_path("a", "src/util.py").write_text("def f():\n    return 2\n")
    await aeventually(
        lambda: any(isinstance(e, BranchUserEdited) for e in events), "the edit applied"
    )

    report = coord.diff()
    assert report["edited_by_user"] == {"a": ["src/util.py"]}
    by_path = {p["path"]: p for p in report["paths"]}
    [util] = by_path["src/util.py"]["branches"].values()
    assert util["label"] == "a" and "edited by the user" in util["user_edit"]
    # the branches' own work is not marked
    assert all("user_edit" not in b for b in by_path["src/app.py"]["branches"].values())
    # the judge's prompt says it too
    text = format_report(coord.diff_report(), limit=10_000)
    assert "- a: modified (edited by the user in their editor" in text
    assert "- a: modified\n" in text  # src/app.py: the branch's own change
    await coord.merge_or_select("abort")
    await coord.aclose()


async def test_a_conflict_found_by_an_on_demand_flush_is_reported_at_once(
    project: Path,
) -> None:
    s = Scripted({"A": [call("write_file", path="src/app.py", content="VALUE = 'a'\n")]})
    coord, events, mat = await mirrored_fork(project, s, "a")
    rt = coord.get_branch("a")
    assert mat is not None and rt.ws_branch is not None and rt.path is not None
    mirrored = mat.branch_path("a", "src/app.py")
    await aeventually(lambda: read(mirrored) == "VALUE = 'a'\n", "mirrored")
    # Both sides change the file while no watcher runs (stopped here so that only the
    # flush can find it: a watcher's next batch would report it too, later); then the diff
    # tool opens and flushes the mirror.
    mat.stop()
    (Path(rt.path) / "src" / "app.py").write_text("VALUE = 'branch'\n")
    mirrored.write_text("VALUE = 'user'\n")
    mat.flush()
    await aeventually(
        lambda: any(isinstance(e, BranchEditConflict) for e in events), "the conflict reported"
    )
    [conflict] = [e for e in events if isinstance(e, BranchEditConflict)]
    assert conflict.path == "src/app.py" and conflict.kept_as is not None
    assert Path(conflict.kept_as).read_text() == "VALUE = 'user'\n"
    assert (Path(rt.path) / "src" / "app.py").read_text() == "VALUE = 'branch'\n"
    assert [c.path for c in coord.edit_conflicts()["a"]] == ["src/app.py"]
    await coord.merge_or_select("abort")
    await coord.aclose()
