"""Fork widgets (badge, tabs, branch panel, ForkArea) hosted in a tiny app and driven by a
real ForkCoordinator whose branches are real pydantic-ai agents on FunctionModels, running
on real copy-on-write workspace branches."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from forkdeck.fork.branch_panel import BLOCK_CHARS, BranchPanelWidget
from forkdeck.fork.fork_area import ForkArea
from forkdeck.fork.fork_badge import ForkBadgeWidget
from forkdeck.fork.fork_tabs import ForkTabsWidget
from pydantic_ai.messages import ModelResponse
from textual.message import Message

from branching_core.fork import ForkCoordinator
from tests.app.fixtures_fork import (
    HostApp,
    StreamScript,
    Turn,
    close_fork,
    make_coordinator,
    make_project,
    screen_text,
    start_fork,
    wait_until,
    widget_is_on_screen,
)
from tests.support.typed import view_of

SIZE = (100, 30)


def selected_labels(messages: list[Message]) -> list[str | None]:
    """The labels of the selection messages posted (any other message fails the test)."""
    labels: list[str | None] = []
    for message in messages:
        assert isinstance(message, ForkTabsWidget.Selected | ForkArea.Selected), message
        labels.append(message.label)
    return labels
STEERS = {"alpha": "steer-alpha", "bravo": "steer-bravo", "charlie": "steer-charlie"}


def chip_texts(area: ForkArea) -> list[str]:
    return [chip.text for chip in area.tabs.chips]


def assert_chips_on_screen(app: HostApp, tabs: ForkTabsWidget) -> None:
    """Every chip is a laid-out, uncovered widget, and its text is in the screen's cells."""
    text = screen_text(app)
    strip_line = next(line for line in text.splitlines() if "+ overview" in line)
    for chip in tabs.chips:
        assert widget_is_on_screen(app, chip), chip.text
        assert chip.text in strip_line, (chip.text, strip_line)


# -- ForkBadgeWidget ---------------------------------------------------------------------------


async def test_badge_is_hidden_without_a_fork_and_shows_the_summary() -> None:
    app = HostApp(lambda: ForkBadgeWidget())
    async with app.run_test(size=SIZE) as pilot:
        badge = app.query_one(ForkBadgeWidget)
        assert not badge.display
        assert "FORK" not in screen_text(app)

        badge.show_summary(3, 2, 0.04)
        await pilot.pause()
        assert "FORK: 3 branches · 2 running · $0.04" in screen_text(app)
        assert widget_is_on_screen(app, badge)

        badge.show_summary(1, 0, None)
        await pilot.pause()
        assert "FORK: 1 branch · 0 running · $?" in screen_text(app)

        badge.clear()
        await pilot.pause()
        assert "FORK" not in screen_text(app)


async def test_badge_follows_a_real_coordinator(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = StreamScript({"steer-alpha": [Turn(["a"], gate=gate)], "steer-bravo": [Turn(["b"])]})
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    app = HostApp(lambda: ForkBadgeWidget())
    async with app.run_test(size=SIZE) as pilot:
        badge = app.query_one(ForkBadgeWidget)
        badge.set_coordinator(coord)
        await pilot.pause()
        assert not badge.display  # a coordinator that has not forked yet

        await start_fork(coord, {"alpha": "steer-alpha", "bravo": "steer-bravo"})
        await wait_until(pilot, lambda: "1 running" in badge.summary_text)
        await pilot.pause()
        assert "FORK: 2 branches · 1 running · $0.01" in screen_text(app)

        gate.set()
        await coord.wait()
        await wait_until(pilot, lambda: "0 running" in badge.summary_text)
        await pilot.pause()
        assert "FORK: 2 branches · 0 running · $0.02" in screen_text(app)

        await coord.abort_fork()
        await wait_until(pilot, lambda: not badge.display)
        await pilot.pause()
        assert "FORK" not in screen_text(app)
    await close_fork(coord)


# -- ForkTabsWidget ------------------------------------------------------------------------------


async def test_tabs_render_a_visible_chip_for_every_state() -> None:
    states = {
        "run": "running",
        "ok": "done",
        "bad": "failed",
        "stop": "terminated",
        "cap": "budget_exhausted",
        "agg": "aggregate_budget_exhausted",
        "wait": "awaiting_approval",
    }
    app = HostApp(lambda: ForkTabsWidget(list(states), states))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tabs = app.query_one(ForkTabsWidget)
        assert [c.text for c in tabs.chips] == [
            "● run",
            "✓ ok",
            "✗ bad",
            "⊘ stop",
            "$ cap",
            "$$ agg",
            "⏸ wait",
            "+ overview",
        ]
        assert_chips_on_screen(app, tabs)

        tabs.set_state("run", "done")
        await pilot.pause()
        assert tabs.chip("run").text == "✓ run"
        assert "✓ run" in screen_text(app)


async def test_tabs_keys_and_clicks_post_selected() -> None:
    app = HostApp(lambda: ForkTabsWidget(["a", "b", "c"], {}))
    async with app.run_test(size=SIZE) as pilot:
        tabs = app.query_one(ForkTabsWidget)
        tabs.focus()
        await pilot.press("right", "right", "3", "0", "left")
        await pilot.pause()
        picked = selected_labels(app.messages)
        assert picked == ["a", "b", "c", None, "c"]
        assert tabs.active == "c"

        await pilot.press("9")  # no ninth branch: nothing happens
        await pilot.pause()
        assert len(app.messages) == 5

        await pilot.click(tabs.chip("b"))
        await pilot.pause()
        assert selected_labels(app.messages)[-1] == "b"
        assert tabs.active == "b"
        assert tabs.chip("b").has_class("-active")
        assert not tabs.chip("c").has_class("-active")


async def test_tabs_scroll_to_keep_the_active_chip_visible() -> None:
    labels = [f"branch-{i}" for i in range(10)]
    app = HostApp(lambda: ForkTabsWidget(labels, {}))
    async with app.run_test(size=(60, 10)) as pilot:
        tabs = app.query_one(ForkTabsWidget)
        await pilot.pause()
        assert widget_is_on_screen(app, tabs.chip("branch-0"))
        assert not widget_is_on_screen(app, tabs.chip("branch-9"))  # ten do not fit in 60
        tabs.set_active("branch-9")
        await pilot.pause()
        assert widget_is_on_screen(app, tabs.chip("branch-9"))
        assert "● branch-9" in screen_text(app)
        tabs.focus()
        await pilot.press("right")  # branch-9 -> overview
        await pilot.pause()
        assert widget_is_on_screen(app, tabs.chip(None))
        assert "+ overview" in screen_text(app)


# -- BranchPanelWidget ---------------------------------------------------------------------------


async def test_panel_draws_a_burst_of_deltas_in_one_flush() -> None:
    app = HostApp(lambda: BranchPanelWidget("alpha", steer="go"))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(BranchPanelWidget)
        for i in range(200):
            panel.append_text(f"t{i} ")
        assert panel.flushes == 0  # nothing drawn per token
        assert panel.pending_text.startswith("t0 t1 ")
        await wait_until(pilot, lambda: panel.flushes > 0)
        await pilot.pause()
        assert panel.flushes == 1
        assert [b.kind for b in panel.blocks] == ["prompt", "assistant"]
        assert panel.blocks[1].text == "".join(f"t{i} " for i in range(200))
        assert "t0 t1 t2" in screen_text(app)


async def test_a_long_reply_continues_in_a_new_block_at_a_line_break() -> None:
    app = HostApp(lambda: BranchPanelWidget("alpha"))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(BranchPanelWidget)
        long_line = "x" * (BLOCK_CHARS + 10)
        panel.append_text(long_line)
        panel.flush()
        panel.append_text(" end\nnext paragraph")
        panel.flush()
        panel.append_text(" goes on")
        panel.flush()
        await pilot.pause()
        assert [b.text for b in panel.blocks] == [long_line + " end", "next paragraph goes on"]
        assert panel.transcript_text == long_line + " end\nnext paragraph goes on"


async def test_panel_follows_the_newest_text() -> None:
    app = HostApp(lambda: BranchPanelWidget("alpha", steer="go"))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(BranchPanelWidget)
        for i in range(80):
            panel.append_text(f"line {i}\n")
            if i % 20 == 19:
                panel.flush()
                panel.add_tool_call("list_dir", {"path": "."})
        panel.append_text("the very last line")
        await wait_until(pilot, lambda: "the very last line" in screen_text(app))
        text = screen_text(app)
        shown = [line.strip() for line in text.splitlines()]
        assert "line 79" in shown
        assert "line 0" not in shown  # scrolled: the start is out of view


async def test_panel_shows_model_text_literally() -> None:
    app = HostApp(lambda: BranchPanelWidget("alpha", steer="[b]steer[/b]"))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(BranchPanelWidget)
        panel.append_text("use [bold]x[/bold] and [link")
        panel.flush()
        await pilot.pause()
        text = screen_text(app)
        assert "use [bold]x[/bold] and [link" in text
        assert "> [b]steer[/b]" in text


# -- ForkArea with a real coordinator ------------------------------------------------------------


async def test_chips_are_visible_and_follow_branch_states(tmp_path: Path) -> None:
    gates = {label: asyncio.Event() for label in STEERS}
    script = StreamScript(
        {
            "steer-alpha": [Turn(["alpha works"], gate=gates["alpha"])],
            "steer-bravo": [Turn(["bravo works"], gate=gates["bravo"])],
            "steer-charlie": [Turn(["charlie works"], gate=gates["charlie"], fail="model broke")],
        }
    )
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    await start_fork(coord, STEERS)
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        await pilot.pause()
        assert chip_texts(area) == ["● alpha", "● bravo", "● charlie", "+ overview"]
        assert_chips_on_screen(app, area.tabs)

        gates["bravo"].set()
        gates["charlie"].set()
        await wait_until(pilot, lambda: chip_texts(area)[1:3] == ["✓ bravo", "✗ charlie"])
        await coord.terminate_branch("alpha")
        await wait_until(pilot, lambda: chip_texts(area)[0] == "⊘ alpha")
        await pilot.pause()
        assert chip_texts(area) == ["⊘ alpha", "✓ bravo", "✗ charlie", "+ overview"]
        assert_chips_on_screen(app, area.tabs)

        # the overview table and the panels tell the same story
        rows = {row[1]: row for row in area.overview_rows()}
        assert rows["alpha"][2] == "⊘ terminated"
        assert rows["bravo"][2] == "✓ done"
        assert rows["charlie"][2] == "✗ failed"
        assert "model broke" in area.panel("charlie").transcript_text
        overview = screen_text(app)
        assert "⊘ terminated" in overview and "✗ failed" in overview
    await close_fork(coord, *gates.values())


async def test_deltas_stream_into_their_own_panel_only(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = StreamScript(
        {
            "steer-alpha": [Turn(["Alpha ", "streams ", "this"], gate=gate)],
            "steer-bravo": [Turn(["Bravo ", "says ", "that"], gate=gate)],
            "steer-charlie": [Turn(["Charlie ", "is ", "quiet"], gate=gate)],
        }
    )
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    await start_fork(coord, STEERS)
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        await wait_until(
            pilot,
            lambda: all(
                area.panel(label).transcript_text.endswith(text)
                for label, text in (
                    ("alpha", "Alpha streams this"),
                    ("bravo", "Bravo says that"),
                    ("charlie", "Charlie is quiet"),
                )
            ),
        )
        # Token by token: the text is on screen while the model response is still open
        # (the branch is blocked inside it, so its history holds no response yet).
        for rt in coord.branches.values():
            assert rt.state == "running"
            assert not any(isinstance(m, ModelResponse) for m in rt.history)
        assert "Bravo" not in area.panel("alpha").transcript_text
        assert "Charlie" not in area.panel("alpha").transcript_text
        assert "Alpha" not in area.panel("bravo").transcript_text
        assert "Alpha" not in area.panel("charlie").transcript_text

        area.select("bravo")
        await pilot.pause()
        text = screen_text(app)
        assert "> steer-bravo" in text and "Bravo says that" in text
        assert "Alpha streams this" not in text
    await close_fork(coord, gate)


async def test_budget_and_aggregate_budget_chips(tmp_path: Path) -> None:
    script = StreamScript(
        {
            "steer-cap": [Turn(["spend"], tool=("list_dir", {"path": "."}))],
            "steer-x": [Turn(["x1"], tool=("list_dir", {"path": "."})), Turn(["x2"])],
            "steer-y": [Turn(["y1"], tool=("list_dir", {"path": "."})), Turn(["y2"])],
        }
    )
    ws = make_project(tmp_path / "p")
    coord = make_coordinator(ws, script)
    await start_fork(coord, {"cap": "steer-cap"}, budgets={"cap": 0.005})
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        await coord.wait()
        await wait_until(pilot, lambda: chip_texts(area)[0] == "$ cap")
        await pilot.pause()
        assert "$ cap" in screen_text(app)
        assert "budget $0.005 exhausted" in area.panel("cap").transcript_text
    await close_fork(coord)

    coord2 = make_coordinator(ws, script)
    gate_x, gate_y = asyncio.Event(), asyncio.Event()
    script.turns["steer-x"][1] = Turn(["x2"], gate=gate_x)
    script.turns["steer-y"][1] = Turn(["y2"], gate=gate_y)
    await start_fork(coord2, {"x": "steer-x", "y": "steer-y"}, aggregate_budget_usd=0.015)
    app2 = HostApp(lambda: ForkArea(coord2))
    async with app2.run_test(size=SIZE) as pilot:
        area = app2.query_one(ForkArea)
        await coord2.wait()
        await wait_until(pilot, lambda: chip_texts(area)[:2] == ["$$ x", "$$ y"])
        await pilot.pause()
        assert_chips_on_screen(app2, area.tabs)
    await close_fork(coord2, gate_x, gate_y)


async def test_select_cycle_and_jump(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = StreamScript({steer: [Turn([label], gate=gate)] for label, steer in STEERS.items()})
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    await start_fork(coord, STEERS)
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        await pilot.pause()
        assert area.active_label is None
        seen = [area.cycle() for _ in range(4)]
        assert seen == ["alpha", "bravo", "charlie", None]
        assert area.cycle(-1) == "charlie"
        assert area.jump(2) is True and area.active_label == "bravo"
        assert area.jump(0) is True and area.active_label is None
        assert area.jump(4) is False and area.active_label is None
        with pytest.raises(ValueError, match="no branch 'nope'"):
            area.select("nope")
        area.select("charlie")
        area.select("charlie")  # no change: no second message
        await pilot.pause()
        assert selected_labels(app.messages) == [
            "alpha",
            "bravo",
            "charlie",
            None,
            "charlie",
            "bravo",
            None,
            "charlie",
        ]
        assert area.tabs.active == "charlie"
        assert area.tabs.chip("charlie").has_class("-active")
        assert "branch charlie · ● running" in screen_text(app)

        # keys on the focused tab strip and clicks on chips select too
        area.tabs.focus()
        await pilot.press("1")
        await pilot.pause()
        assert area.active_label == "alpha"
        assert "branch alpha · ● running" in screen_text(app)
        await pilot.press("right")
        await pilot.pause()
        assert area.active_label == "bravo"
        await pilot.click(area.tabs.chip(None))
        await pilot.pause()
        assert area.active_label is None
        assert "3 branches · 3 running" in screen_text(app)
    await close_fork(coord, gate)


async def test_fork_created_after_mount_builds_the_tabs(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = StreamScript({"steer-a": [Turn(["hi"], gate=gate)], "steer-b": [Turn(["yo"])]})
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        await pilot.pause()
        assert chip_texts(area) == ["+ overview"]

        await start_fork(coord, {"a": "steer-a", "b": "steer-b"})
        await wait_until(pilot, lambda: chip_texts(area) == ["● a", "✓ b", "+ overview"])
        await wait_until(pilot, lambda: area.panel("a").transcript_text.endswith("hi"))
        await pilot.pause()
        assert_chips_on_screen(app, area.tabs)
    await close_fork(coord, gate)


async def test_steering_and_follow_up_turns_reach_the_branch_and_the_panel(
    tmp_path: Path,
) -> None:
    gate = asyncio.Event()
    script = StreamScript(
        {
            "steer-a": [
                Turn(["working"], tool=("list_dir", {"path": "."})),
                Turn(["ok"], gate=gate),
            ],
            "steer-b": [Turn(["b done"])],
            "more please": [Turn(["here ", "is ", "more"])],
        }
    )
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    await start_fork(coord, {"a": "steer-a", "b": "steer-b"})
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        await wait_until(pilot, lambda: "⚙ list_dir" in area.panel("a").transcript_text)
        coord.steer("a", "focus on speed")
        gate.set()
        await coord.wait()
        await wait_until(pilot, lambda: area.panel("a").state == "done")
        assert ">> focus on speed" in area.panel("a").transcript_text
        assert "focus on speed" not in area.panel("b").transcript_text
        # what the branches actually received
        assert any("focus on speed" in p for p in script.received["steer-a"][-1])
        assert not any("focus on speed" in p for req in script.received["steer-b"] for p in req)

        area.add_user_message("b", "more please")
        await coord.run_on_branch("b", "more please")
        await coord.wait()
        await wait_until(pilot, lambda: area.panel("b").transcript_text.endswith("here is more"))
        area.select("b")
        await pilot.pause()
        text = screen_text(app)
        assert "> more please" in text and "here is more" in text
        assert chip_texts(area)[1] == "✓ b"
    await close_fork(coord)


async def test_approval_request_marks_the_chip_and_posts_a_message(tmp_path: Path) -> None:
    script = StreamScript(
        {"steer-w": [Turn(["writing"], tool=("write_file", {"path": "w.txt", "content": "w"}))]}
    )
    coord = make_coordinator(make_project(tmp_path / "p"), script, approval_required=["write_file"])
    await start_fork(coord, {"w": "steer-w"})
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        await wait_until(
            pilot, lambda: any(type(m) is ForkArea.ApprovalRequested for m in app.messages)
        )
        message = next(m for m in app.messages if type(m) is ForkArea.ApprovalRequested)
        assert message.label == "w"
        # streamed tool calls carry their arguments as JSON text
        assert [(c.tool_name, json.loads(c.args)) for c in message.calls] == [
            ("write_file", {"path": "w.txt", "content": "w"})
        ]
        await pilot.pause()
        assert chip_texts(area)[0] == "⏸ w"
        assert "⏸ w" in screen_text(app)
        assert "waiting for approval: write_file" in area.panel("w").transcript_text

        await coord.approve("w", {message.calls[0].tool_call_id: True})
        await coord.wait()
        await wait_until(pilot, lambda: chip_texts(area)[0] == "✓ w")
        assert (view_of(coord.branches[next(iter(coord.branches))]) / "w.txt").read_text() == "w"
    await close_fork(coord)


async def test_a_recovered_fork_is_replayed_from_its_history(tmp_path: Path) -> None:
    gate = asyncio.Event()
    script = StreamScript(
        {
            "write": [Turn(["writing"], tool=("write_file", {"path": "won.txt", "content": "1"}))],
            "hang": [Turn(["thinking"], gate=gate)],
        }
    )
    root = tmp_path / "p"
    coord = make_coordinator(make_project(root), script)
    await start_fork(coord, {"writer": "write", "hanger": "hang"})
    await coord.wait(branch_ids=["writer"])
    await coord.flush()

    (recovered,) = ForkCoordinator.recover(root)  # as a new session would after a crash
    app = HostApp(lambda: ForkArea(recovered))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        await pilot.pause()
        assert chip_texts(area) == ["✓ writer", "⊘ hanger", "+ overview"]
        assert area.panel("writer").transcript_text.splitlines() == [
            "> write",
            "writing",
            '⚙ write_file {"path": "won.txt", "content": "1"}',
            "↳ write_file: created won.txt (1 bytes)",
            "write: finished",
        ]
        assert "interrupted" in area.panel("hanger").transcript_text
        area.select("writer")
        await pilot.pause()
        assert "↳ write_file: created won.txt" in screen_text(app)
    await close_fork(coord, gate)


async def test_switching_to_a_branch_that_streamed_while_hidden_shows_its_end(
    tmp_path: Path,
) -> None:
    """Issue 13.17: a long transcript written while another tab was shown opens at its
    newest line, not at its top; scrolling up lets go, paging to the end follows again."""
    lines = [f"line {i}\n" for i in range(120)]
    script = StreamScript(
        {
            "steer-alpha": [Turn(lines)],
            "steer-bravo": [Turn(["short"])],
        }
    )
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    await start_fork(coord, {"alpha": "steer-alpha", "bravo": "steer-bravo"})
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        await coord.wait()
        area.flush()
        await pilot.pause()
        area.select("alpha")
        await pilot.pause()
        await pilot.pause()
        shown = [line.strip() for line in screen_text(app).splitlines()]
        assert "line 119" in shown
        assert "line 0" not in shown
        panel = area.panel("alpha")
        panel.scroll_page(-1)
        await pilot.pause()
        assert "line 119" not in [line.strip() for line in screen_text(app).splitlines()]
        panel.scroll_page(100)
        await pilot.pause()
        assert "line 119" in [line.strip() for line in screen_text(app).splitlines()]
    await close_fork(coord)


def test_the_overviews_last_line_shows_the_end_of_a_long_line() -> None:
    """Issue 13.19: a stream grows at its end; the start of a long line looked frozen."""
    from forkdeck.fork.fork_area import last_line

    long = "word " * 40 + "NEWEST"
    shown = last_line(f"first line\n{long}\n\n", 30)
    assert shown.endswith("NEWEST") and shown.startswith("…") and len(shown) == 30
    assert last_line("short\nlast one\n", 30) == "last one"
    assert last_line("", 30) == ""


async def test_the_overview_row_follows_the_newest_text_of_a_long_line(tmp_path: Path) -> None:
    gate = asyncio.Event()
    chunks = [f"token{i} " for i in range(60)]
    script = StreamScript({"steer-alpha": [Turn(chunks, gate=gate)]})
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    await start_fork(coord, {"alpha": "steer-alpha"})
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=(80, 24)) as pilot:
        area = app.query_one(ForkArea)
        await wait_until(pilot, lambda: "token59" in area.panel("alpha").tail_text(2000))
        area.flush()
        (row,) = area.overview_rows()
        assert row[-1].endswith("token59")
        await pilot.pause()
        assert "token59" in screen_text(app)  # the whole row fits in 80 columns
    await close_fork(coord, gate)


async def test_a_steer_is_drawn_where_the_model_receives_it(tmp_path: Path) -> None:
    """Issue 13.20: a steer sent while a response streams is drawn after that response's
    tool call and result (it reaches the *next* request), not above them."""
    gate = asyncio.Event()
    script = StreamScript(
        {
            "steer-a": [
                Turn(["working"], gate=gate, tool=("list_dir", {"path": "."})),
                Turn(["ok"]),
            ],
        }
    )
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    await start_fork(coord, {"a": "steer-a"})
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        panel = area.panel("a")
        await wait_until(pilot, lambda: "working" in panel.tail_text(500))
        coord.steer("a", "focus on speed")
        await pilot.pause()
        assert "1 steer queued" in panel.header_text
        gate.set()
        await coord.wait()
        area.flush()
        await wait_until(pilot, lambda: panel.state == "done")
        kinds = [(b.kind, b.text.split(":")[0]) for b in panel.blocks]
        assert kinds == [
            ("prompt", "> steer-a"),
            ("assistant", "working"),
            ("tool", "⚙ list_dir {\"path\""),
            ("result", "↳ list_dir"),
            ("steer", ">> focus on speed"),
            ("assistant", "ok"),
        ]
        assert any("focus on speed" in p for p in script.received["steer-a"][-1])
        assert "queued" not in panel.header_text
    await close_fork(coord)


async def test_consecutive_responses_are_separate_blocks(tmp_path: Path) -> None:
    """Issue 14.12: two model responses in a row were glued into one paragraph
    ("...people.Yes, that's..."). Here a steer sent during the last response makes the run
    ask once more; each response is its own block, the steer between them."""
    from pydantic_ai import Agent
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from tests.app.conftest import user_prompts

    gate = asyncio.Event()

    async def stream(messages: list, info: AgentInfo):
        if any("and more" in p for p in user_prompts(messages)):
            yield "Yes, that's the second."
            return
        yield "First answer for the people."
        await gate.wait()

    async def respond(messages: list, info: AgentInfo) -> ModelResponse:
        raise AssertionError("streaming only")

    model = FunctionModel(respond, stream_function=stream, model_name="two")
    coord = ForkCoordinator(Agent(model), workspace=make_project(tmp_path / "p"), stream_text=True)
    await start_fork(coord, {"a": "go"})
    app = HostApp(lambda: ForkArea(coord))
    async with app.run_test(size=SIZE) as pilot:
        area = app.query_one(ForkArea)
        panel = area.panel("a")
        await wait_until(pilot, lambda: "people." in panel.tail_text(500))
        coord.steer("a", "and more")
        gate.set()
        await coord.wait()
        area.flush()
        assert [(b.kind, b.text) for b in panel.blocks] == [
            ("prompt", "> go"),
            ("assistant", "First answer for the people."),
            ("steer", ">> and more"),
            ("assistant", "Yes, that's the second."),
        ]
    await close_fork(coord)


def test_the_status_line_fits_its_width_and_keeps_the_activity() -> None:
    """Issue 13.21: at 80 columns the status line was cut (the activity, the most useful
    part, went first)."""
    from forkdeck.chat.status_bar import StatusInfo, format_status

    info = StatusInfo(
        model="anthropic:claude-sonnet-4-5",
        backend="overlay",
        cost_usd=0.0421,
        input_tokens=123_456,
        output_tokens=7_890,
        activity="thinking… (esc stops)",
    )
    full = format_status(info)
    assert full.startswith("model anthropic:claude-sonnet-4-5 │ workspace overlay")
    assert format_status(info, 200) == full
    for width in (78, 60, 50, 40):
        line = format_status(info, width)
        assert len(line) <= width, (width, line)
        assert line.endswith("thinking… (esc stops)")
        assert "$0.0421" in line
    assert "123.5k↑ 7.9k↓" in format_status(info, 78)


async def test_a_hidden_panel_buffers_and_catches_up_in_bounded_blocks() -> None:
    """Perf: a hidden panel draws nothing; shown, its backlog lands in blocks of bounded
    size (a paragraph with no line break is split at spaces), so no redraw re-wraps all."""
    app = HostApp(lambda: BranchPanelWidget("alpha", steer="go", shown=False))
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(BranchPanelWidget)
        words = [f"w{i} " for i in range(6000)]
        for word in words:
            panel.append_text(word)
        await pilot.pause(0.2)
        assert panel.flushes == 0  # hidden: no timer, no drawing
        panel.add_tool_call("list_dir", {"path": "."})  # a block while hidden: not mounted
        assert panel.blocks[-1].parent is None
        panel.set_shown(True)
        await pilot.pause()
        sizes = [len(b.text) for b in panel.blocks if b.kind == "assistant"]
        assert len(sizes) > 1 and max(sizes) <= 2 * BLOCK_CHARS
        assert "".join(b.text for b in panel.blocks if b.kind == "assistant").replace(
            " w", "w"
        ).count("w") == len(words)
        assert all(b.parent is not None for b in panel.blocks)
        assert "list_dir" in screen_text(app)
