"""Issue 14 item 12 in the branch panel: consecutive responses are never glued together.

A branch's first response is plain text; a steer sent while it streams makes the run send one
more request. The panel must show two assistant blocks ("...people." / "Yes, ..."), not one
glued line, and a cut-and-retried stream is marked.
"""

from __future__ import annotations

from pathlib import Path

from forkdeck.fork.fork_area import ForkArea

from branching_core.fork import BranchSpec
from tests.app.fixtures_fork import HostApp, wait_until
from tests.realserver.fork_helpers import coordinator, server_config
from tests.support.openai_server import Reply, ScriptedServer


async def test_a_steered_second_response_gets_its_own_block(
    tmp_path: Path, server: ScriptedServer
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    server.push(
        Reply("text", ["Most ", "people", "."] + [""] * 20, delay=0.05),
        Reply.text("Yes, ", "that's it."),
    )
    coord, _ = coordinator(root, server_config(server))
    await coord.fork([BranchSpec("a", "who?")], parent_history=[])
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=(100, 30)) as pilot:
        area = app.query_one(ForkArea)
        panel = area.panel("a")
        await wait_until(pilot, lambda: "people" in panel.transcript_text + panel.pending_text)
        coord.steer("a", "are you sure?")
        await coord.wait(timeout=30)
        await wait_until(pilot, lambda: "that's it." in panel.transcript_text)
        replies = [b.text for b in panel.blocks if b.kind == "assistant"]
        assert replies == ["Most people.", "Yes, that's it."], replies
        assert "people.Yes" not in panel.transcript_text
        # The steer sits where the model read it: after the first reply, before the second.
        kinds = [(b.kind, b.text) for b in panel.blocks if b.kind in ("assistant", "steer")]
        assert kinds == [
            ("assistant", "Most people."),
            ("steer", ">> are you sure?"),
            ("assistant", "Yes, that's it."),
        ], kinds
    await coord.abort_fork()


async def test_a_retried_cut_stream_is_noted_in_the_panel(
    tmp_path: Path, server: ScriptedServer
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    server.push(Reply.cut("half an"), Reply.text("A whole answer."))
    coord, _ = coordinator(root, server_config(server))
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=(100, 30)) as pilot:
        await coord.fork([BranchSpec("a", "q")], parent_history=[])
        await coord.wait(timeout=30)
        area = app.query_one(ForkArea)
        await wait_until(pilot, lambda: "A whole answer." in area.panel("a").transcript_text)
        text = area.panel("a").transcript_text
        assert "server cut the response" in text
    await coord.abort_fork()
