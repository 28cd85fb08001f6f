"""Write SVG screenshots of forkdeck's main screens to ``screenshots/`` (shown in the README).

The app runs under Textual's Pilot on a throwaway workspace with the ``copy`` backend and
the offline model (steers are offline scripts, so the branches really run shell commands
and write files). Pictures: chat idle, the fork picker, three branches running, the
notices of the user's own edits in a branch's mirror, the merge picker.

    /work/venv/bin/python scripts/screenshots.py [--out screenshots]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZE = (120, 36)
STEERS = [
    "write notes.md\n# plan A: a hash table\nend\n!wc -l notes.md",
    "write notes.md\n# plan B: a sorted list\nend\n!cat notes.md",
    "!echo 'plan C: a trie' > trie.txt\nls",
]


def paced_offline() -> Any:
    """The offline model, slowed so a screenshot catches three branches mid-stream."""
    from branching_core.agent import OfflineModel

    return OfflineModel("slow", delay=0.15)


async def _until(pilot: Any, check: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise RuntimeError("screenshot scene never settled")
        await pilot.pause(0.05)


async def ide_edits(pilot: Any, coordinator: Any) -> None:
    """Issue 17.2: an edit made in branch hash's mirror (as an IDE saves), then a conflict
    on branch sorted (both sides change notes.md before the watcher looks)."""
    from branching_core.fork.mirror.materializer import _branch_held

    mat = coordinator.mirror_hook.materializer
    await _until(pilot, lambda: mat.branch_path("hash", "notes.md").exists())
    mat.branch_path("hash", "notes.md").write_text("# plan A: a hash table\nopen addressing\nend\n")
    await _until(pilot, lambda: bool(coordinator.user_edits()))
    rt = coordinator.get_branch("sorted")
    with _branch_held(rt.ws_branch):
        (Path(rt.path) / "notes.md").write_text("# plan B: a sorted list, bisect\n")
        mat.branch_path("sorted", "notes.md").write_text("# plan B: a skip list\n")
    await _until(pilot, lambda: bool(coordinator.edit_conflicts()))
    await pilot.pause(0.3)


async def shoot(out: Path) -> list[Path]:
    from forkdeck.fork.fork_picker import ForkPickerModal
    from forkdeck.forkdeck_app import ForkdeckApp
    from forkdeck.merge.merge_picker import MergePickerModal
    from forkdeck.session import ChatSession
    from textual.widgets import Input

    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["FORKDECK_STORE"] = str(Path(tmp) / "store")
        workspace = Path(tmp) / "project"
        workspace.mkdir()
        (workspace / "README.md").write_text("# a small project\n")
        config = workspace / ".pydantic-deep" / "config.toml"
        config.parent.mkdir()
        config.write_text("[fork]\nbranches = 3\nper_branch_budget_usd = 0.25\n")

        session = ChatSession(workspace, requested_model=paced_offline(), backend="copy")
        app = ForkdeckApp(session, cursor_blink=False, offer_recovery=False)

        def save(name: str) -> None:
            path = out / f"{name}.svg"
            app.save_screenshot(str(path))
            written.append(path)

        async with app.run_test(size=SIZE) as pilot:
            await asyncio.wait_for(app.prepared.wait(), 30)
            await pilot.pause()
            save("chat_idle")

            chat = app.chat
            assert chat is not None
            chat.handle_line("/fork")
            await _until(pilot, lambda: isinstance(app.screen, ForkPickerModal))
            picker = app.screen
            for slot, label in enumerate(("hash", "sorted", "trie"), start=1):
                picker.query_one(f"#label-{slot}", Input).value = label
                picker.query_one(f"#steer-{slot}", Input).value = STEERS[slot - 1]
            picker.query_one("#aggregate", Input).value = "1.00"
            await pilot.pause()
            save("fork_picker")

            await pilot.press("ctrl+s")
            await _until(pilot, lambda: chat.fork_area is not None)
            await pilot.pause(0.6)
            chat.fork_area.select("hash")
            await pilot.pause(0.3)
            save("three_branches_running")

            coordinator = session.coordinator
            await _until(
                pilot,
                lambda: all(s.state != "running" for s in coordinator.inspect_branches()),
            )
            chat.fork_area.select(None)
            await pilot.pause(0.3)
            save("fork_overview_done")
            await ide_edits(pilot, coordinator)
            save("ide_edit_notices")
            chat.handle_line("/merge")
            await _until(pilot, lambda: isinstance(app.screen, MergePickerModal))
            await pilot.pause(0.3)
            save("merge_picker")
            await pilot.press("escape")
            await session.abort_fork()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in asyncio.run(shoot(args.out)):
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


if __name__ == "__main__":
    main()
