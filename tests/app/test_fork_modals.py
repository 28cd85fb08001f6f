"""The fork modals (picker, confirm, approval, recover) hosted in a tiny app, with real
settings files, a real ForkCoordinator and real workspace branches where they matter."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from forkdeck.common.confirm import ConfirmModal
from forkdeck.fork.approval import ApprovalModal
from forkdeck.fork.fork_picker import ForkPickerModal, ForkRequest
from forkdeck.fork.recover_fork import RecoverForkModal
from textual import events
from textual.binding import Binding
from textual.widgets import Input

from branching_core.config import Settings, SettingsStore
from branching_core.fork import BranchSpec, ForkCoordinator, list_open_forks
from branching_core.fork.events import ApprovalCall
from tests.app.conftest import screen_as
from tests.app.fixtures_fork import (
    HostApp,
    StreamScript,
    Turn,
    close_fork,
    make_coordinator,
    make_project,
    screen_text,
    start_fork,
)

SIZE = (110, 34)


class PickerHost(HostApp):
    """Opens the picker from a key binding, like the chat screen's ``/fork`` does."""

    BINDINGS = [Binding("ctrl+f", "open_picker", "Fork")]

    def __init__(self, settings: Settings, n: int = 3) -> None:
        super().__init__()
        self.settings = settings
        self.n = n

    def action_open_picker(self) -> None:
        self.open_modal(ForkPickerModal(self.n, self.settings))


def values(app: HostApp, *ids: str) -> list[str]:
    return [app.screen.query_one(f"#{i}", Input).value for i in ids]


async def type_into(pilot: Any, field_id: str, text: str, *, replace: bool = True) -> None:
    field = pilot.app.screen.query_one(f"#{field_id}", Input)
    field.focus()
    await pilot.pause()
    if replace:
        field.value = ""
    await pilot.press(*text)


def settings_from_a_real_file(root: Path) -> Settings:
    store = SettingsStore(root)
    store.set_branch_count(4)
    store.set_budget("per-branch", "0.25")
    store.set_budget("aggregate", "2.00")
    store.set("model.default", "anthropic:claude-sonnet-4-5")
    store.set_branch_model(1, "anthropic:claude-opus-4-6")
    store.set_branch_model(2, "openrouter:openai/gpt-4.1")
    return SettingsStore(root).settings


# -- ForkPickerModal -----------------------------------------------------------------------------


async def test_picker_rows_are_prefilled_from_settings(tmp_path: Path) -> None:
    settings = settings_from_a_real_file(tmp_path)
    app = PickerHost(settings, n=settings.fork_branch_count)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+f")
        await pilot.pause()
        assert isinstance(app.screen, ForkPickerModal)
        assert values(app, *(f"label-{i}" for i in range(1, 5))) == ["a", "b", "c", "d"]
        assert values(app, *(f"model-{i}" for i in range(1, 5))) == [
            "anthropic:claude-opus-4-6",
            "openrouter:openai/gpt-4.1",
            "",
            "",
        ]
        assert values(app, *(f"budget-{i}" for i in range(1, 5))) == ["0.25"] * 4
        assert values(app, "aggregate") == ["2"]
        text = screen_text(app)
        assert "Fork into 4 branches" in text
        model_3 = app.screen.query_one("#model-3", Input)
        assert model_3.placeholder == "(default)"
        assert "(default) = anthropic:claude-sonnet-4-5" in text
        assert "anthropic:claude-opus-4-6" in text


async def test_first_keys_typed_land_in_the_first_field() -> None:
    app = PickerHost(Settings())
    async with app.run_test(size=SIZE) as pilot:
        # the binding that opens the picker and the first keys in one burst, no pause
        await pilot.press("ctrl+f", "f", "a", "s", "t")
        await pilot.pause()
        assert values(app, "label-1") == ["fast"]
        assert app.screen.focused is app.screen.query_one("#label-1", Input)

    app2 = PickerHost(Settings())
    async with app2.run_test(size=SIZE) as pilot:
        app2.open_modal(ForkPickerModal(2, Settings()))  # push, then type at once
        await pilot.press("q", "u", "i", "c", "k")
        await pilot.pause()
        assert values(app2, "label-1") == ["quick"]


async def test_keys_typed_in_one_burst_after_tab_land_in_the_next_field() -> None:
    """A paste or a fast typist: Tab and the text after it arrive before any repaint."""
    app = PickerHost(Settings())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+f")
        await pilot.pause()
        # All queued at once, as the terminal driver does with a burst of input (Pilot's
        # press() would wait for each key to be handled, hiding the race).
        burst = ["x", "tab", "g", "o", "tab", "tab", "tab", "y"]
        for key in burst:
            app.post_message(events.Key(key, key if len(key) == 1 else None))
        await pilot.pause()
        await pilot.pause()
        assert values(app, "label-1", "steer-1", "label-2") == ["x", "go", "y"]


async def test_picker_returns_the_edited_request(tmp_path: Path) -> None:
    settings = Settings(
        per_branch_budget_usd=0.25,
        aggregate_budget_usd=2.0,
        branch_models={1: "anthropic:claude-opus-4-6"},
    )
    app = PickerHost(settings, n=3)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+f")
        await pilot.pause()
        await type_into(pilot, "steer-1", "use a hash table")
        await type_into(pilot, "steer-2", "use a btree")
        await type_into(pilot, "label-3", "sorted")
        await type_into(pilot, "steer-3", "keep it sorted")
        await type_into(pilot, "model-3", "offline")
        await type_into(pilot, "budget-2", "$0.5")
        await type_into(pilot, "budget-3", "")
        await type_into(pilot, "aggregate", "")
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [
        ForkRequest(
            specs=[
                BranchSpec("a", "use a hash table", "anthropic:claude-opus-4-6", 0.25),
                BranchSpec("b", "use a btree", None, 0.5),
                BranchSpec("sorted", "keep it sorted", "offline", None),
            ],
            aggregate_budget_usd=None,
        )
    ]


async def test_picker_reports_bad_input_inline_and_stays_open() -> None:
    app = PickerHost(Settings(), n=2)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+f")
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, ForkPickerModal)

        cases = [
            ([("steer-2", "y")], "row 1: steer is empty but row 2 has one", "steer-1"),
            (
                [("steer-1", "x"), ("label-2", "a")],
                "row 2: label 'a' is already used by row 1",
                "label-2",
            ),
            ([("label-2", "b b")], "row 2: label 'b b' may only use letters", "label-2"),
            (
                [("label-2", "b"), ("model-1", "gpt4")],
                "row 1: model 'gpt4' needs a provider",
                "model-1",
            ),
            (
                [("model-1", ""), ("budget-2", "abc")],
                "row 2 budget: 'abc' is not a number",
                "budget-2",
            ),
            ([("budget-2", "-1")], "row 2 budget: must be greater than 0", "budget-2"),
            (
                [("budget-2", ""), ("aggregate", "0")],
                "aggregate budget: must be greater than 0",
                "aggregate",
            ),
        ]
        for edits, expected, bad_field in cases:
            for field_id, text in edits:
                await type_into(pilot, field_id, text)
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen is picker  # still open
            assert app.results == []
            assert picker.error_text.startswith(expected), picker.error_text
            assert "\n" not in picker.error_text
            assert expected in screen_text(app)
            assert app.screen.focused is picker.query_one(f"#{bad_field}", Input)

        await type_into(pilot, "aggregate", "1")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is not picker
        assert app.results == [
            ForkRequest([BranchSpec("a", "x"), BranchSpec("b", "y")], aggregate_budget_usd=1.0)
        ]


async def test_picker_escape_cancels() -> None:
    app = PickerHost(Settings())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+f")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]


async def test_picker_request_spawns_branches_that_receive_their_steers(tmp_path: Path) -> None:
    script = StreamScript({"go left": [Turn(["went left"])], "go right": [Turn(["went right"])]})
    coord = make_coordinator(make_project(tmp_path / "p"), script)
    app = PickerHost(Settings(aggregate_budget_usd=1.5), n=2)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+f")
        await pilot.pause()
        await type_into(pilot, "steer-1", "go left")
        await type_into(pilot, "steer-2", "go right")
        await pilot.press("enter")
        await pilot.pause()
    request = app.results[0]
    handle = await coord.fork(
        request.specs, parent_history=[], aggregate_budget_usd=request.aggregate_budget_usd
    )
    await coord.wait()
    assert handle.aggregate_budget_usd == 1.5
    assert {s.label: s.output for s in coord.inspect_branches()} == {
        "a": "went left",
        "b": "went right",
    }
    assert script.received["go left"][0][-1] == "go left"
    assert script.received["go right"][0][-1] == "go right"
    await close_fork(coord)


# -- ConfirmModal --------------------------------------------------------------------------------


async def test_confirm_keys_and_buttons() -> None:
    app = HostApp()
    async with app.run_test(size=SIZE) as pilot:
        for keys in (["y"], ["n"], ["escape"], ["enter"], ["right", "enter"]):
            app.open_modal(ConfirmModal("terminate alpha?"))
            await pilot.pause()
            assert "terminate alpha?" in screen_text(app)
            await pilot.press(*keys)
            await pilot.pause()
        app.open_modal(ConfirmModal("abort the entire fork?"))
        await pilot.pause()
        await pilot.click("#no")
        await pilot.pause()
    # Enter alone answers No (the dialog focuses No: issue 13.4); right, Enter is Yes.
    assert app.results == [True, False, False, False, True, False]


async def test_confirm_default_yes_focuses_yes() -> None:
    app = HostApp()
    async with app.run_test(size=SIZE) as pilot:
        app.open_modal(ConfirmModal("keep going?", default=True))
        await pilot.pause()
        assert app.screen.focused is not None and app.screen.focused.id == "yes"
        await pilot.press("enter")
        await pilot.pause()
        app.open_modal(ConfirmModal("abort?"))
        await pilot.pause()
        assert app.screen.focused is not None and app.screen.focused.id == "no"
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [True, False]


# -- ApprovalModal -------------------------------------------------------------------------------

CALLS = [
    ApprovalCall("c1", "write_file", {"path": "a.py", "content": "print(1)"}),
    ApprovalCall("c2", "run_command", '{"command": "rm -rf build"}'),
    {"tool_call_id": "c3", "tool_name": "delete_file", "args": {"path": "old.txt"}},
]


async def run_approval(keys: list[str]) -> dict[str, bool]:
    app = HostApp()
    async with app.run_test(size=SIZE) as pilot:
        app.open_modal(ApprovalModal("alpha", CALLS))
        await pilot.pause()
        await pilot.press(*keys)
        await pilot.pause()
    assert len(app.results) == 1
    return app.results[0]


async def test_approval_lists_every_call_with_its_arguments() -> None:
    app = HostApp()
    async with app.run_test(size=SIZE) as pilot:
        app.open_modal(ApprovalModal("alpha", CALLS))
        await pilot.pause()
        text = screen_text(app)
        assert "Branch alpha asks to run 3 tool calls" in text
        assert 'write_file  {"path": "a.py", "content": "print(1)"}' in text
        assert 'run_command  {"command": "rm -rf build"}' in text
        assert 'delete_file  {"path": "old.txt"}' in text
        await pilot.press("down")
        await pilot.pause()
        assert '"command": "rm -rf build"' in screen_text(app)  # the detail pane follows


async def test_approval_decisions() -> None:
    all_ids = ["c1", "c2", "c3"]
    assert await run_approval(["a", "enter"]) == dict.fromkeys(all_ids, True)
    assert await run_approval(["escape"]) == dict.fromkeys(all_ids, False)
    assert await run_approval(["enter"]) == dict.fromkeys(all_ids, False)  # undecided = deny
    # y approves and moves down, n denies and moves down, space toggles the current one
    assert await run_approval(["y", "n", "space", "enter"]) == {
        "c1": True,
        "c2": False,
        "c3": True,
    }
    assert await run_approval(["a", "up", "up", "n", "enter"]) == {
        "c1": False,
        "c2": True,
        "c3": True,
    }


async def test_approval_answers_drive_a_real_branch(tmp_path: Path) -> None:
    script = StreamScript(
        {
            "write it": [Turn(["ok"], tool=("write_file", {"path": "w.txt", "content": "yes"}))],
            "write not": [Turn(["ok"], tool=("write_file", {"path": "n.txt", "content": "no"}))],
        }
    )
    coord = make_coordinator(make_project(tmp_path / "p"), script, approval_required=["write_file"])
    await start_fork(coord, {"yes": "write it", "no": "write not"})
    await coord.wait()
    app = HostApp()
    async with app.run_test(size=SIZE) as pilot:
        for label, keys in (("yes", ["a", "enter"]), ("no", ["escape"])):
            calls = coord.pending_approvals(label)
            assert [c.tool_name for c in calls] == ["write_file"]
            app.open_modal(ApprovalModal(label, calls))
            await pilot.pause()
            await pilot.press(*keys)
            await pilot.pause()
            await coord.approve(label, app.results[-1])
        await coord.wait()
    paths = {s.label: Path(s.path or "") for s in coord.inspect_branches()}
    assert (paths["yes"] / "w.txt").read_text() == "yes"
    assert not (paths["no"] / "n.txt").exists()
    assert {s.label: s.state for s in coord.inspect_branches()} == {"yes": "done", "no": "done"}
    await close_fork(coord)


# -- RecoverForkModal ----------------------------------------------------------------------------


async def leave_a_fork_open(
    root: Path, *, hang: bool = True
) -> tuple[ForkCoordinator, asyncio.Event]:
    """A fork with one finished branch (that wrote a file) and one still running (``hang``)
    or finished too; its state is on disk and it is neither merged nor aborted."""
    gate = asyncio.Event()
    if not hang:
        gate.set()
    script = StreamScript(
        {
            "write": [Turn(["writing"], tool=("write_file", {"path": "won.txt", "content": "1"}))],
            "hang": [Turn(["thinking"], gate=gate)],
        }
    )
    coord = make_coordinator(make_project(root), script)
    await start_fork(coord, {"writer": "write", "hanger": "hang"})
    await coord.wait(branch_ids=None if not hang else ["writer"])
    await coord.flush()
    return coord, gate


async def choose(open_forks: list[Any], keys: list[str]) -> Any:
    app = HostApp()
    async with app.run_test(size=SIZE) as pilot:
        app.open_modal(RecoverForkModal(open_forks))
        await pilot.pause()
        await pilot.press(*keys)
        await pilot.pause()
    return app.results[0]


async def test_recover_lists_open_forks_with_branch_states(tmp_path: Path) -> None:
    root = tmp_path / "p"
    coord, gate = await leave_a_fork_open(root)
    open_forks = list_open_forks(root)
    assert len(open_forks) == 1
    app = HostApp()
    async with app.run_test(size=SIZE) as pilot:
        modal = RecoverForkModal(open_forks)
        app.open_modal(modal)
        await pilot.pause()
        text = screen_text(app)
        assert "1 fork was left open by an earlier session" in text
        assert f"fork {coord.fork_id}" in text
        assert "merge writer  ·  ✓ done  ·  default model  ·  $0.0200" in text
        # a branch whose process was gone is shown as recovery will see it
        assert "merge hanger  ·  ⊘ terminated" in text and "interrupted" in text
        assert "abort this fork" in text
        assert modal.option_ids() == ["reopen-0", "merge-0-0", "merge-0-1", "abort-0"]
        assert "reopen: tabs and transcripts" in text
    await close_fork(coord, gate)


async def test_recover_choices_merge_or_abort_a_real_fork(tmp_path: Path) -> None:
    root = tmp_path / "p"
    coord, _ = await leave_a_fork_open(root, hang=False)
    fork_id = coord.fork_id
    open_forks = list_open_forks(root)
    assert await choose(open_forks, ["escape"]) is None
    assert await choose(open_forks, ["enter"]) == ("reopen", fork_id)  # the safe default
    assert await choose(open_forks, ["down", "down", "down", "enter"]) == ("abort", fork_id)
    choice = await choose(open_forks, ["down", "enter"])
    assert choice == ("merge", fork_id, "writer")

    # what the chat screen does with the choice after a restart: the old session is gone
    # (its coordinator is dropped unresolved), a recovered coordinator merges the pick
    del coord
    (recovered,) = ForkCoordinator.recover(root)
    assert recovered.fork_id == fork_id
    result = await recovered.merge_or_select(f"pick:{choice[2]}")
    assert result.winner_label == "writer"
    assert (root / "won.txt").read_text() == "1"
    assert list_open_forks(root) == []

    # the modal also takes recovered coordinators
    coord2, gate2 = await leave_a_fork_open(tmp_path / "q")
    assert await choose([coord2], ["down", "down", "enter"]) == (
        "merge",
        coord2.fork_id,
        "hanger",
    )
    await close_fork(coord2, gate2)


async def test_picker_adds_and_removes_rows_for_this_fork_only(tmp_path: Path) -> None:
    """Issue 13.15: "fork into 3 this time" from a picker opened with 2 rows, without
    rewriting config.toml (only /fork-branches writes the default count)."""
    root = tmp_path / "p"
    root.mkdir()
    store = SettingsStore(root)
    store.set_branch_count(2)
    config = root / ".pydantic-deep" / "config.toml"
    before = config.read_text()
    app = PickerHost(SettingsStore(root).settings, n=2)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+f")
        await pilot.pause()
        await pilot.press("ctrl+n")
        await pilot.pause()
        picker = screen_as(app, ForkPickerModal)
        assert picker.n == 3 and "Fork into 3 branches" in screen_text(app)
        assert app.screen.focused is picker.query_one("#label-3", Input)
        await pilot.press("ctrl+n")  # a 4th row, then remove the 2nd: rows below move up
        await pilot.pause()
        for slot, steer in enumerate(["one", "two", "three", "four"], start=1):
            picker.query_one(f"#steer-{slot}", Input).value = steer
        picker.query_one("#steer-2", Input).focus()
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert picker.n == 3
        assert values(app, "label-1", "label-2", "label-3") == ["a", "c", "d"]
        assert values(app, "steer-1", "steer-2", "steer-3") == ["one", "three", "four"]
        await pilot.click("#remove-row")  # the button (focused itself) drops the last row
        await pilot.pause()
        assert values(app, "label-1", "label-2") == ["a", "c"]
        await pilot.click("#add-row")  # a new row gets a label no other row uses
        await pilot.pause()
        picker.query_one("#steer-3", Input).value = "five"
        await pilot.press("ctrl+s")
        await pilot.pause()
    request = app.results[0]
    assert [(s.label, s.steer) for s in request.specs] == [
        ("a", "one"),
        ("c", "three"),
        ("b", "five"),
    ]
    assert config.read_text() == before  # the per-fork count is never written
    assert SettingsStore(root).settings.fork_branch_count == 2


async def test_picker_keeps_between_one_row_and_max_branches() -> None:
    app = PickerHost(Settings(max_branches=2), n=2)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+f")
        await pilot.pause()
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert screen_as(app, ForkPickerModal).n == 2
        assert "at most 2 branches" in screen_as(app, ForkPickerModal).error_text
        await pilot.press("ctrl+r", "ctrl+r")
        await pilot.pause()
        assert screen_as(app, ForkPickerModal).n == 1
        assert "at least one branch" in screen_as(app, ForkPickerModal).error_text
