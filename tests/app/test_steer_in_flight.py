"""Issue 24.9: a steer typed while a branch's request is in flight (sent, no token back
yet: a real model's long first-token wait) is drawn where the model receives it, after
the response that never saw it, not above that response. Real coordinator, streaming
FunctionModel held before its first token."""

from __future__ import annotations

import asyncio
from pathlib import Path

from forkdeck.fork.fork_area import ForkArea

from tests.app.fixtures_fork import (
    HostApp,
    StreamScript,
    Turn,
    close_fork,
    make_coordinator,
    make_project,
    start_fork,
    wait_until,
)

SIZE = (110, 34)


async def test_a_steer_sent_before_the_first_token_follows_that_response(
    tmp_path: Path,
) -> None:
    gate = asyncio.Event()
    script = StreamScript(
        {"steer-a": [Turn((), gate=gate, tool=("list_dir", {"path": "."})), Turn(["ok"])]}
    )
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    await start_fork(coord, {"a": "steer-a"})
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        panel = area.panel("a")
        await wait_until(pilot, lambda: bool(script.received.get("steer-a")))  # in flight
        assert not panel.tail_text(500).strip().endswith("working")
        coord.steer("a", "focus on speed")
        await pilot.pause()
        assert "1 steer queued" in panel.header_text
        gate.set()  # the held response (a tool call) comes back, without the steer
        await coord.wait()
        area.flush()
        await wait_until(pilot, lambda: panel.state == "done")
        kinds = [(b.kind, b.text.split(":")[0]) for b in panel.blocks]
        assert kinds == [
            ("prompt", "> steer-a"),
            ("tool", '⚙ list_dir {"path"'),
            ("result", "↳ list_dir"),
            ("steer", ">> focus on speed"),
            ("assistant", "ok"),
        ]
        first, second = script.received["steer-a"][:2]
        assert not any("focus on speed" in p for p in first)  # the held request lacked it
        assert any("focus on speed" in p for p in second)  # the next one carried it
    await close_fork(coord)
