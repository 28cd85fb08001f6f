"""Issue 17.2 in the TUI: the user's edits in a branch's mirror show in the fork log, a
conflict is a warning there, and the diff explorer marks those paths "edited by you".

Real app, real overlay workspace and mirror watcher, real FunctionModel branches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forkdeck.chat.screen import ChatScreen
from forkdeck.merge.merge_picker import BranchColumn, MergePickerModal
from forkdeck.review.diff_explorer import DiffExplorerScreen
from forkdeck.review.merge_diff import DiffPaths
from textual.widgets import Static, Tree

from branching_core.fork.mirror.edit_intake import branch_held as _branch_held
from tests.app.conftest import TERMINAL, GatedModel, make_app, open_held_fork, ready, wait_for
from tests.app.fixtures_merge import ScreenHost, run_fork
from tests.fork.test_mirror import aeventually, read

SIZE = (140, 40)


def _chat(app: Any) -> ChatScreen:
    chat = app.chat
    assert isinstance(chat, ChatScreen)
    return chat


def _leaves(node: Any) -> dict[str, str]:
    """path -> the label the tree shows for it."""
    out: dict[str, str] = {}
    for child in node.children:
        if child.data:
            out[str(child.data)] = child.label.plain
        out.update(_leaves(child))
    return out


def _logged(chat: ChatScreen, text: str) -> bool:
    log = chat.fork_log
    return log.display and any(text in line for line in log.lines_text)


async def test_fork_log_tells_of_an_edit_and_of_a_conflict(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = _chat(app)
        await open_held_fork(pilot, gated)
        coord = app.session.coordinator
        assert coord is not None
        await wait_for(
            pilot,
            lambda: (
                coord.mirror_hook.materializer is not None
                and coord.mirror_hook.materializer.wait_ready(0)
            ),
            what="the mirror",
        )
        mat = coord.mirror_hook.materializer
        (mat.branch_dir("a") / "from_ide.py").write_text("print('hi')\n")
        await wait_for(
            pilot,
            lambda: _logged(chat, "you edited from_ide.py (created, +1 -0) in branch a"),
            what=lambda: chat.fork_log.lines_text,
        )
        rt = coord.get_branch("a")
        assert rt.path is not None
        assert (Path(rt.path) / "from_ide.py").read_text() == "print('hi')\n"
        # both sides change one file before the watcher looks: a conflict, not an overwrite
        with _branch_held(rt.ws_branch):
            (Path(rt.path) / "from_ide.py").write_text("print('branch')\n")
            (mat.branch_dir("a") / "from_ide.py").write_text("print('me again')\n")
        await wait_for(
            pilot,
            lambda: _logged(chat, "⚠ conflict in branch a: from_ide.py was changed by the branch"),
            what=lambda: chat.fork_log.lines_text,
        )
        assert (Path(rt.path) / "from_ide.py").read_text() == "print('branch')\n"
        assert "conflict in branch a" in " ".join(n.message for n in app._notifications)
        assert coord.user_edits() == {"a": ["from_ide.py"]}
        gated.release_all()


async def test_explorer_marks_paths_edited_by_you(tmp_path: Path) -> None:
    run = await run_fork(tmp_path / "project", materialize=True)
    try:
        mat = run.coordinator.mirror_hook.materializer
        mirrored = mat.branch_path("a", "src/app.py")
        await aeventually(lambda: read(mirrored) == "VALUE = 2\n", "a's write mirrored")
        mirrored.write_text("VALUE = 'mine'\n")
        await aeventually(
            lambda: run.coordinator.user_edits() == {"a": ["src/app.py"]}, "the edit relayed"
        )
        paths = DiffPaths.for_coordinator(run.coordinator)
        assert paths.user_edited == {"src/app.py": ("a",)}
        app = ScreenHost(
            lambda: DiffExplorerScreen(run.report, paths=paths, initial_path="src/app.py")
        )
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, DiffExplorerScreen)
            tree = screen.query_one("#diff-tree", Tree)
            leaves = _leaves(tree.root)
            assert "edited by you" in leaves["src/app.py"]
            assert "edited by you" not in leaves["notes.md"]
            title = screen.query_one("#diff-path-title", Static)
            assert "edited by you in a" in str(title.render())
        # the merge picker's column for a marks the path in its changed-file list too
        picker = ScreenHost(lambda: MergePickerModal(run.report, run.statuses, paths=paths))
        async with picker.run_test(size=SIZE) as pilot:
            await pilot.pause()
            heads = {
                column.label: str(column.query_one(".merge-column-diff-text", Static).render())
                for column in picker.screen.query(BranchColumn)
            }
            assert "M src/app.py  edited by you" in heads["a"]
            assert "edited by you" not in heads["b"] and "src/app.py" in heads["b"]
    finally:
        await run.coordinator.aclose()
