"""The fork flow end to end inside the app: picker, live branches, steering, keys, merge.

Branches run a real ``Agent`` on a recording ``FunctionModel`` (``GatedModel``) in real
copy-on-write workspace branches; the tests assert on what each branch was actually sent
and on the files on disk after the merge.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

from forkdeck.chat.screen import ChatScreen
from forkdeck.common.confirm import ConfirmModal
from forkdeck.common.tool_output import ToolOutputModal
from forkdeck.fork.approval import ApprovalModal
from forkdeck.fork.fork_badge import ForkBadgeWidget
from forkdeck.fork.recover_fork import RecoverForkModal
from forkdeck.merge.merge_acceptance import MergeAcceptanceModal
from forkdeck.merge.merge_picker import BranchColumn, MergePickerModal
from forkdeck.review.diff_explorer import DiffExplorerScreen
from forkdeck.session import ChatSession
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel
from textual.widgets import Static

from branching_core.fork import BranchSpec, list_open_forks
from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    chat_screen,
    escape,
    make_app,
    open_fork,
    parent_turn,
    ready,
    screen_as,
    states,
    submit,
    wait_for,
)
from tests.app.fixtures_merge import recording_difftool
from tests.support.typed import coordinator_of, view_of


async def _choices_focused(pilot: Any, app: Any) -> None:
    """The recovery dialog is the screen as soon as it is pushed, but its choices take the
    focus only once it has mounted: a key pressed before that is lost (the "down" of a
    blind pick, and "enter" then chooses the first row). A person sees the highlight first."""
    await wait_for(
        pilot, lambda: screen_as(app, RecoverForkModal).option_list.has_focus,
        what="the dialog's choices to take the focus",
    )

async def test_fork_streams_branches_and_merge_keeps_the_winners_files_and_history(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await parent_turn(pilot, "remember the parent turn")
        area = await open_fork(
            pilot, ["!echo a > a.txt", "!echo b > b.txt && rm README.txt"], aggregate="1.5"
        )
        assert area.labels == ["a", "b"]
        handle = coordinator_of(app).handle
        assert handle is not None and handle.aggregate_budget_usd == 1.5
        badge = chat.query_one(ForkBadgeWidget)
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        await pilot.pause(0.3)
        assert badge.display and badge.summary_text.startswith("FORK: 2 branches · 0 running")
        # Each branch got the parent's history and then its own steer, nothing else.
        assert gated.prompts_of("!echo a")[0] == ["remember the parent turn", "!echo a > a.txt"]
        assert all("!echo b" not in p for r in gated.prompts_of("!echo a") for p in r)
        # Nothing reached the parent directory yet.
        assert not (project / "a.txt").exists() and (project / "README.txt").exists()

        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        await pilot.press("2", "enter")
        await wait_for(pilot, lambda: not app.session.fork_active and chat.fork_area is None)
        assert (project / "b.txt").read_text() == "b\n"
        assert not (project / "README.txt").exists()
        assert not (project / "a.txt").exists()
        assert not badge.display
        # The winner's conversation is now the chat, and the next turn continues from it.
        transcript = "\n".join(chat.messages.transcript())
        assert "> !echo b > b.txt && rm README.txt" in transcript
        assert "merged branch b" in chat.last_notice
        await submit(pilot, "what next")
        await wait_for(pilot, lambda: not chat.turn_running and bool(gated.prompts_of("what")))
        assert gated.prompts_of("what next")[-1] == [
            "remember the parent turn",
            "!echo b > b.txt && rm README.txt",
            "what next",
        ]


async def test_steering_reaches_only_that_branch_and_unknown_labels_are_refused(
    project: Path, gated: GatedModel
) -> None:
    gate = gated.gate("hold")
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_fork(pilot, ["hold a", "hold b"])
        await wait_for(pilot, lambda: len(gated.requests) == 2, what="both branches asked")
        await submit(pilot, ">>zzz do something")
        assert "no branch 'zzz' in this fork; branches: a, b" in chat.last_notice
        await submit(pilot, ">>a focus on tests")
        assert chat.last_notice == ">>a: focus on tests"
        await submit(pilot, "plain text on the overview")
        assert ">>label message" in chat.last_notice
        gate.set()
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        told_a = [p for r in gated.prompts_of("hold a") for p in r]
        told_b = [p for r in gated.prompts_of("hold b") for p in r]
        assert "focus on tests" in told_a
        assert "focus on tests" not in told_b
        assert all("zzz" not in p and "plain text" not in p for p in told_a + told_b)


async def test_tab_cycles_numbers_jump_and_ctrl_g_returns_to_the_input(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        area = await open_fork(pilot, ["one", "two", "three"])
        assert area.active_label is None
        seen = []
        for _ in range(4):
            await pilot.press("tab")
            seen.append(area.active_label)
        assert seen == ["a", "b", "c", None]
        await pilot.press("alt+3")
        assert area.active_label == "c"
        assert app.focused is chat.input  # none of that moved the focus away from typing
        area.tabs.focus()
        await pilot.pause()
        await pilot.press("2")
        assert area.active_label == "b"
        await pilot.press("ctrl+g")
        assert app.focused is chat.input
        await pilot.press("1")  # typed into the input, not a jump
        assert chat.input.value == "1" and area.active_label == "b"


async def test_plain_text_on_a_branch_tab_continues_that_branch_only(
    project: Path, gated: GatedModel
) -> None:
    gate = gated.gate("hold")
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        area = await open_fork(pilot, ["quick", "hold b"])
        await wait_for(
            pilot, lambda: states(app)["a"] == "done", what=lambda: states(app)
        )
        await pilot.press("alt+2")
        await submit(pilot, "more please")
        assert "branch b is still running" in chat.last_notice and ">>b" in chat.last_notice
        await pilot.press("alt+1")
        assert area.active_label == "a"
        await submit(pilot, "follow up for a")
        await wait_for(pilot, lambda: bool(gated.prompts_of("follow up for a")), what="sent")
        await wait_for(
            pilot, lambda: states(app)["a"] == "done", what=lambda: states(app)
        )
        assert gated.prompts_of("follow up for a")[-1] == ["quick", "follow up for a"]
        assert not gated.prompts_of("more please")
        gate.set()
        await wait_for(
            pilot, lambda: states(app)["b"] == "done", what=lambda: states(app)
        )
        assert all("follow up" not in p for r in gated.prompts_of("hold b") for p in r)


async def test_escape_terminates_a_branch_and_on_the_overview_aborts_the_fork(
    project: Path, gated: GatedModel
) -> None:
    gated.gate("hold")
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        area = await open_fork(pilot, ["hold !echo a > a.txt", "hold b"])
        await wait_for(pilot, lambda: len(gated.requests) == 2, what="both branches asked")
        await pilot.press("alt+1")
        await escape(pilot, ConfirmModal)
        assert "Terminate branch a?" in screen_as(app, ConfirmModal).question
        await pilot.press("y")
        await wait_for(
            pilot, lambda: states(app)["a"] == "terminated", what=lambda: states(app)
        )
        assert states(app)["b"] == "running"
        # Esc on a branch that is not running offers no Terminate that would do nothing
        # (issue 13.13): it goes back to the overview.
        area.select("a")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmModal)
        assert area.active_label is None and app.session.fork_active
        # Esc answered "no" changes nothing.
        await pilot.press("alt+2", "escape")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="confirm")
        await pilot.press("n")
        await pilot.pause()
        assert states(app)["b"] == "running"
        area.select(None)
        await escape(pilot, ConfirmModal)
        assert "Abort the entire fork?" in screen_as(app, ConfirmModal).question
        await pilot.press("y")
        await wait_for(pilot, lambda: chat.fork_area is None and not app.session.fork_active)
        assert "fork aborted: 2 branches discarded" in chat.last_notice
        assert sorted(p.name for p in project.iterdir() if p.name != ".pydantic-deep") == [
            "README.txt",
            "src",
        ]
        gated.release_all()


async def test_commands_outside_the_allow_list_are_blocked_during_a_fork(
    project: Path, gated: GatedModel
) -> None:
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_fork(pilot, ["one", "two"])
        for line in ("/fork", "/fork-branches 3", "/clear"):
            await submit(pilot, line)
            assert "is blocked while a fork is open" in chat.last_notice
        assert not (project / ".pydantic-deep" / "config.toml").exists()
        await submit(pilot, "/cost")
        assert "fork " in chat.last_notice and "  a: price unknown (1 requests)" in chat.last_notice
        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        await pilot.press("escape")
        await pilot.pause()
        assert app.session.fork_active and "merge cancelled" in chat.last_notice


async def test_fork_diff_launches_the_configured_diff_tool(
    project: Path, gated: GatedModel, tmp_path: Path, monkeypatch: object
) -> None:
    record = tmp_path / "difftool-args.txt"
    tool = tmp_path / "difftool.sh"
    tool.write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("FORKDECK_DIFFTOOL", f"{tool} {{parent}} {{branches}}")  # type: ignore[attr-defined]
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_fork(pilot, ["!echo one >> README.txt", "!echo two >> README.txt"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        await submit(pilot, "/fork diff README.txt")
        await wait_for(pilot, lambda: "diff tool" in chat.last_notice, what="launch")
        await wait_for(pilot, lambda: record.exists(), what="the tool ran")
        await asyncio.sleep(0.1)
        args = record.read_text().split()
        assert args[0].endswith("README.txt") and len(args) == 3
        contents = [Path(a).read_text() for a in args]
        assert contents[0] == "hello\n"
        assert sorted(contents[1:]) == ["hello\none\n", "hello\ntwo\n"]
        await submit(pilot, "/fork diff nowhere.txt")
        assert "no branch touched nowhere.txt" in chat.last_notice
    assert os.environ.get("FORKDECK_DIFFTOOL")


async def test_fork_diff_without_a_diff_tool_opens_the_explorer(
    project: Path, gated: GatedModel, monkeypatch: object
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # type: ignore[attr-defined]  # no pycharm/code
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await open_fork(pilot, ["write notes.md\nfrom a\nend", "write notes.md\nfrom b\nend"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        await submit(pilot, "/fork diff notes.md")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffExplorerScreen), what="explorer")
        assert screen_as(app, DiffExplorerScreen).selected_path == "notes.md"
        await escape(pilot, ChatScreen)
        assert app.session.fork_active


async def test_judge_verdict_is_shown_before_the_merge_and_enter_accepts(
    project: Path, gated: GatedModel
) -> None:
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        '[review]\nmerge_strategy = "auto_with_fallback"\nconfidence_threshold = 0.0\n'
    )
    app = make_app(project, gated.model)
    app.session.judges = [
        TestModel(custom_output_args={"winner": "b", "confidence": 0.9, "rationale": "b wrote it"})
    ]
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_fork(pilot, ["!echo a > a.txt", "!echo b > b.txt"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        await submit(pilot, "/merge")
        await wait_for(
            pilot, lambda: isinstance(app.screen, MergeAcceptanceModal), what="the verdict"
        )
        assert app.session.fork_active  # nothing merged before the user says so
        assert not (project / "b.txt").exists()
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.session.fork_active and chat.fork_area is None)
        assert (project / "b.txt").read_text() == "b\n"
        assert not (project / "a.txt").exists()
        assert "merged branch b" in chat.last_notice


async def test_a_fork_left_open_by_a_crashed_session_is_offered_at_start(
    project: Path, gated: GatedModel
) -> None:
    crashed = ChatSession(project, requested_model=gated.model)
    await asyncio.to_thread(crashed.prepare)
    coordinator = await crashed.start_fork(
        [BranchSpec("a", "!echo a > a.txt"), BranchSpec("b", "!echo b > b.txt")], None
    )
    await coordinator.wait()
    await coordinator.flush()  # the "crash": nobody merges or aborts
    await crashed.aclose()  # ... and the session is gone (its mirror watcher with it)
    assert not (project / "a.txt").exists()

    app = make_app(project, gated.model, recovery=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: isinstance(app.screen, RecoverForkModal), what="offer")
        modal = screen_as(app, RecoverForkModal)
        assert modal.option_ids()[:3] == ["reopen-0", "merge-0-0", "merge-0-1"]
        await _choices_focused(pilot, app)
        await pilot.press("down", "down", "enter")  # the third row: merge branch b
        await wait_for(pilot, lambda: (project / "b.txt").exists(), what="the merge")
        await wait_for(pilot, lambda: not app.session.fork_active)
        assert not (project / "a.txt").exists()
        assert gated.prompts_of("!echo b")[0] == ["!echo b > b.txt"]
        # the merged branch's turns are appended to the chat once the merge has landed
        await wait_for(
            pilot,
            lambda: "> !echo b > b.txt" in "\n".join(chat_screen(app).messages.transcript()),
            what="the merged turns in the chat",
        )


async def test_a_branch_waiting_for_approval_runs_the_tool_only_when_approved(
    project: Path,
) -> None:
    ran: list[str] = []

    async def respond(messages: list, info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if any(getattr(p, "part_kind", "") == "tool-return" for p in last.parts):
            return ModelResponse(parts=[TextPart("deployed")])
        return ModelResponse(parts=[ToolCallPart("deploy", {"target": "prod"})])

    async def stream(messages: list, info: AgentInfo):
        response = await respond(messages, info)
        part = response.parts[0]
        if isinstance(part, TextPart):
            yield part.content
        else:
            assert isinstance(part, ToolCallPart)
            yield {0: DeltaToolCall(name=part.tool_name, json_args='{"target": "prod"}')}

    model = FunctionModel(respond, stream_function=stream, model_name="deployer")
    app = make_app(project, model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)

        @app.session.agent.tool_plain(requires_approval=True)
        def deploy(target: str) -> str:
            """Deploy to ``target``."""
            ran.append(target)
            return f"deployed to {target}"

        await open_fork(pilot, ["ship it", "ship it too"])
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalModal), what="approval")
        first = screen_as(app, ApprovalModal).label
        assert ran == []
        await pilot.press("y", "enter")
        await wait_for(
            pilot, lambda: states(app)[first] == "done", what=lambda: states(app)
        )
        assert ran == ["prod"]
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalModal), what="approval 2")
        second = screen_as(app, ApprovalModal).label
        assert second != first
        await pilot.press("escape")  # deny all
        await wait_for(
            pilot, lambda: states(app)[second] == "done", what=lambda: states(app)
        )
        assert ran == ["prod"]


async def test_quit_with_an_open_fork_keeps_it_for_the_next_start(
    project: Path, gated: GatedModel
) -> None:
    gated.gate("hold")
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await open_fork(pilot, ["quick", "hold b"])
        await wait_for(
            pilot, lambda: states(app)["a"] == "done", what=lambda: states(app)
        )
        await submit(pilot, "/quit")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), what="quit asks")
        await pilot.press("y")  # b still runs: quitting asks first (issue 13.18)
        await wait_for(pilot, lambda: not app.is_running)
    left = list_open_forks(project)
    assert len(left) == 1
    by_label = {b["label"]: b["state"] for b in left[0]["branches"]}
    assert by_label == {"a": "done", "b": "terminated"}
    assert sorted(p.name for p in project.iterdir() if p.name != ".pydantic-deep") == [
        "README.txt",
        "src",
    ]


def _under(path: str, root: Path) -> bool:
    return Path(path).resolve().is_relative_to(root.resolve())


async def test_the_diff_tool_gets_the_forks_mirror_never_the_live_tree(
    project: Path, gated: GatedModel, tmp_path: Path, monkeypatch: object
) -> None:
    """Issue 13.6: ``/fork diff`` and the merge picker's ``o`` hand the tool paths inside
    ``.pydantic-deep/forks/<id>/`` (parent/, branches/<label>/), each of which exists; a side
    where the file does not exist gets an empty placeholder there."""
    template, out = recording_difftool(tmp_path)
    monkeypatch.setenv("FORKDECK_DIFFTOOL", template)  # type: ignore[attr-defined]
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_fork(pilot, ["!echo one >> README.txt", "!echo new > new.txt"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        fork_id = coordinator_of(app).fork_id
        assert fork_id is not None
        mirror = project / ".pydantic-deep" / "forks" / fork_id
        # The parent moves on after the fork: the tool must still see the fork-time version.
        (project / "README.txt").write_text("changed in the parent\n")

        async def run_tool(line: str) -> list[str]:
            before = len(out.read_text().splitlines()) if out.exists() else 0
            await submit(pilot, line)
            await wait_for(
                pilot,
                lambda: out.exists() and len(out.read_text().splitlines()) > before,
                what=lambda: chat.last_notice,
            )
            argv = json.loads(out.read_text().splitlines()[-1])
            for arg in argv:
                assert _under(arg, mirror), (arg, mirror)
                assert Path(arg).exists(), arg
            return argv

        argv = await run_tool("/fork diff README.txt")
        assert len(argv) == 2  # only branch a touched it
        assert Path(argv[0]).read_text() == "hello\n"
        assert Path(argv[1]).read_text() == "hello\none\n"
        argv = await run_tool("/fork diff new.txt")
        assert len(argv) == 2  # a created file: an empty parent placeholder, then b's file
        assert Path(argv[0]).read_text() == "" and Path(argv[0]).name == "new.txt"
        assert Path(argv[1]).read_text() == "new\n"
        argv = await run_tool("/fork diff")
        assert sorted(Path(a).name for a in argv) == ["a", "b", "parent"]

        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        before = len(out.read_text().splitlines())
        await pilot.press("right", "o")
        await wait_for(pilot, lambda: len(out.read_text().splitlines()) > before, what="o")
        argv = json.loads(out.read_text().splitlines()[-1])
        assert [Path(a) for a in argv] == [mirror / "parent", mirror / "branches" / "b"]
        assert all(Path(a).is_dir() for a in argv)
        await pilot.press("2", "enter")
        await wait_for(pilot, lambda: not app.session.fork_active)
    assert (project / "new.txt").read_text() == "new\n"
    assert not (mirror / "parent").exists() and not (mirror / "absent").exists()


async def leave_fork_open(project: Path, gated: GatedModel) -> str:
    """A session forks two branches that write files, then "crashes" (nobody resolves it)."""
    crashed = ChatSession(project, requested_model=gated.model)
    await asyncio.to_thread(crashed.prepare)
    await crashed.run_turn("the parent turn", _NullSink())
    coordinator = await crashed.start_fork(
        [BranchSpec("a", "!echo a > a.txt"), BranchSpec("b", "!echo b > b.txt")], None
    )
    await coordinator.wait()
    await coordinator.flush()
    assert coordinator.fork_id is not None
    # the crash: the process is gone; its mirror watcher with it
    if coordinator.mirror_hook is not None:
        coordinator.mirror_hook.detach()
    return coordinator.fork_id


class _NullSink:
    def on_text(self, delta: str) -> None: ...

    def on_tool_call(self, tool_call_id: str, tool_name: str, args: object) -> None: ...

    def on_tool_result(self, tool_call_id: str, tool_name: str, content: str, ok: bool) -> None: ...


async def test_reopen_a_crashed_fork_then_diff_continue_a_branch_and_merge(
    project: Path, gated: GatedModel, tmp_path: Path, monkeypatch: object
) -> None:
    """Issue 13.7: "reopen" brings back the tabs with the recovered transcripts, the mirror
    for the diff tool, follow-up turns on a branch, and the merge picker."""
    fork_id = await leave_fork_open(project, gated)
    template, out = recording_difftool(tmp_path)
    monkeypatch.setenv("FORKDECK_DIFFTOOL", template)  # type: ignore[attr-defined]
    app = make_app(project, gated.model, recovery=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await wait_for(pilot, lambda: isinstance(app.screen, RecoverForkModal), what="offer")
        assert screen_as(app, RecoverForkModal).option_ids()[0] == "reopen-0"
        await _choices_focused(pilot, app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: chat.fork_area is not None, what="the reopened fork")
        await wait_for(pilot, lambda: "reopened" in chat.last_notice, what="the notice")
        area = chat.fork_area
        assert area is not None
        assert area.labels == ["a", "b"] and app.session.fork_active
        assert f"fork {fork_id} reopened" in chat.last_notice
        # the recovered branches are listed (drawn on the overview's first refresh)
        await wait_for(pilot, lambda: len(area.overview.text.splitlines()) >= 3, what="rows")
        rows = area.overview.text.splitlines()[1:]
        assert [r.split()[1] for r in rows] == ["a", "b"]
        area.select("b")
        await pilot.pause()
        panel = area.panel("b")
        assert "> !echo b > b.txt" in panel.transcript_text  # the recovered transcript
        assert "run_command" in panel.transcript_text or "⚙" in panel.transcript_text
        # the diff tool gets the rebuilt mirror
        await submit(pilot, "/fork diff b.txt")
        await wait_for(pilot, lambda: out.exists(), what=lambda: chat.last_notice)
        argv = json.loads(out.read_text().splitlines()[-1])
        mirror = project / ".pydantic-deep" / "forks" / fork_id
        assert [Path(a).read_text() for a in argv] == ["", "b\n"]
        assert all(_under(a, mirror) for a in argv)
        # a follow-up turn on branch b runs in b's workspace branch, with b's history
        await submit(pilot, "write more.txt")
        await wait_for(pilot, lambda: "more.txt" in panel.transcript_text, what="the follow-up")
        await wait_for(
            pilot, lambda: states(app)["b"] == "done", what=lambda: states(app)
        )
        assert gated.prompts_of("write more.txt")[-1] == [
            "the parent turn",
            "!echo b > b.txt",
            "write more.txt",
        ]
        assert not (project / "more.txt").exists()
        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        await pilot.press("2", "enter")
        await wait_for(pilot, lambda: not app.session.fork_active and chat.fork_area is None)
    assert (project / "b.txt").read_text() == "b\n"
    assert (project / "more.txt").read_text() == ""
    assert not (project / "a.txt").exists()
    assert list_open_forks(project) == []


async def test_decide_later_then_fork_offers_the_open_fork_and_never_opens_a_second(
    project: Path, gated: GatedModel
) -> None:
    fork_id = await leave_fork_open(project, gated)
    app = make_app(project, gated.model, recovery=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await wait_for(pilot, lambda: isinstance(app.screen, RecoverForkModal), what="offer")
        await pilot.press("escape")  # decide later
        await wait_for(pilot, lambda: isinstance(app.screen, ChatScreen))
        await submit(pilot, "/fork")
        await wait_for(pilot, lambda: isinstance(app.screen, RecoverForkModal), what="re-offer")
        await escape(pilot, ChatScreen)
        try:
            await app.session.start_fork([BranchSpec("x", "second")], None)
        except RuntimeError as exc:
            assert fork_id in str(exc) and "still open" in str(exc)
        else:
            raise AssertionError("a second fork opened over the one left open")
        assert [m["fork_id"] for m in list_open_forks(project)] == [fork_id]
        assert not chat.session.fork_active


async def test_long_tool_output_expands_opens_in_full_and_panels_scroll_by_key(
    project: Path, gated: GatedModel
) -> None:
    """Issue 13.9: a branch's test output is readable: click expands a result, ctrl+o shows
    the full text, PgUp/PgDn scroll the panel while the input keeps the focus."""
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        area = await open_fork(pilot, ["!seq 1 200", "!echo short"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        await pilot.press("ctrl+o")  # on the overview: nothing to show, says so
        assert not isinstance(app.screen, ToolOutputModal)
        area.select("a")
        await pilot.pause()
        panel = area.panel("a")
        (result,) = panel.results
        assert result.full_text.splitlines()[-1].strip() == "200"
        assert "more lines" in result.text and "\n200" not in result.text
        await pilot.click(result)
        await pilot.pause()
        assert result.expanded and "\n200" in result.text
        scroll = panel.query_one(".transcript")
        await pilot.pause()
        assert scroll.max_scroll_y > 0
        chat.input.focus()
        scroll.scroll_end(animate=False)
        await pilot.pause()
        bottom = scroll.scroll_y
        await pilot.press("pageup")
        await pilot.pause()
        assert scroll.scroll_y < bottom and chat.input.has_focus
        await pilot.press("pagedown")
        await pilot.pause()
        assert scroll.scroll_y == bottom
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, ToolOutputModal), what="modal")
        modal = screen_as(app, ToolOutputModal)
        assert modal.shown.text == result.full_text
        assert "200" in str(modal.query_one("#text").render())
        await escape(pilot, ChatScreen)


async def test_a_merge_appends_the_winners_turns_and_keeps_notices_and_output(
    project: Path, gated: GatedModel
) -> None:
    """Issue 13.12: nothing printed before or during the fork is wiped by the merge."""
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await parent_turn(pilot, "the parent turn")
        await submit(pilot, "!echo shell-output-before")
        await wait_for(pilot, lambda: "shell-output-before" in chat.last_notice)
        await submit(pilot, "/tokens")
        await open_fork(pilot, ["!echo a > a.txt", "!echo b > b.txt"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        await submit(pilot, "/cost")  # during the fork
        cost_notice = chat.last_notice
        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        await pilot.press("1", "enter")
        await wait_for(pilot, lambda: not app.session.fork_active and chat.fork_area is None)
        transcript = chat.messages.transcript()
        joined = "\n".join(transcript)
        assert "shell-output-before" in joined
        assert any(line.startswith("chat: ") and "in /" in line for line in transcript)
        assert cost_notice in transcript
        assert transcript.count("> the parent turn") == 1  # appended, not rebuilt
        assert "> !echo a > a.txt" in transcript
        assert transcript.index("> !echo a > a.txt") > transcript.index(cost_notice)
        assert "1 path written" in chat.last_notice  # and the plural is right (13.21)


async def test_merging_a_recovered_branch_whose_change_conflicts_changes_nothing(
    project: Path, gated: GatedModel
) -> None:
    """Issue 13.25: the branch's only change collides with a parent change made after the
    fork: a clear error; the files, the chat and the fork stay as they were."""
    crashed = ChatSession(project, requested_model=gated.model)
    await asyncio.to_thread(crashed.prepare)
    coordinator = await crashed.start_fork(
        [BranchSpec("a", "!echo from-a >> README.txt"), BranchSpec("b", "!echo b > b.txt")],
        None,
    )
    await coordinator.wait()
    await coordinator.flush()
    if coordinator.mirror_hook is not None:
        coordinator.mirror_hook.detach()
    (project / "README.txt").write_text("changed in the parent\n")

    app = make_app(project, gated.model, recovery=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await wait_for(pilot, lambda: isinstance(app.screen, RecoverForkModal), what="offer")
        await _choices_focused(pilot, app)
        await pilot.press("down", "enter")  # merge a, blind, from the dialog
        await wait_for(pilot, lambda: "was not merged" in chat.last_notice, what="the error")
        assert "README.txt changed here since the fork" in chat.last_notice
        assert app.session.history == []
        assert not any(line.startswith("> !echo") for line in chat.messages.transcript())
        assert app.session.fork_active  # still open: pick another branch, or abort
        # the fork view is whole once its notice is out (fork_area is set before it mounts)
        await wait_for(pilot, lambda: "reopened" in chat.last_notice, what="the fork view")
        assert chat.fork_area is not None
        assert (project / "README.txt").read_text() == "changed in the parent\n"
        await app.session.abort_fork()
    assert not (project / "b.txt").exists()


def _column_header(picker: MergePickerModal, label: str) -> str:
    column = next(c for c in picker.query(BranchColumn) if c.label == label)
    return str(column.query_one(".merge-column-header", Static).render())


async def test_the_merge_picker_is_live_and_s_stops_a_running_branch_and_merges_it(
    project: Path, gated: GatedModel
) -> None:
    """Issues 13.11 and 13.10: a branch that finishes while the picker is open reads done
    at once; ``s`` on a running one stops it and merges what it has."""
    hold_a = gated.gate("hold-a")
    gated.gate("hold-b")
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await open_fork(pilot, ["hold-a then finish", "hold-b forever"])
        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        picker = screen_as(app, MergePickerModal)
        assert "running" in _column_header(picker, "a")
        hold_a.set()
        await wait_for(
            pilot, lambda: "done" in _column_header(picker, "a"), what="a done in the picker"
        )
        assert "running" in _column_header(picker, "b")
        await pilot.press("right", "s")
        await wait_for(pilot, lambda: not app.session.fork_active and chat.fork_area is None)
        assert "merged branch b" in chat.last_notice
    gated.release_all()


async def test_a_judge_without_a_model_says_so_and_the_picker_shows_branch_tests(
    project: Path,
) -> None:
    """Issue 13.24: with no LLM, a judge strategy says the judge needs a model (no raw
    UnexpectedModelBehavior), and the picker shows ``test_command``'s per-branch result."""
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir()
    config.write_text('[review]\nmerge_strategy = "auto"\ntest_command = "test -f a.txt"\n')
    app = make_app(project)  # no model, no key: the offline model
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        assert app.session.offline
        await open_fork(pilot, ["!echo a > a.txt", "!echo b > b.txt"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        notices = "\n".join(chat.messages.transcript())
        assert "the judge needs a model" in notices
        assert "UnexpectedModelBehavior" not in notices
        picker = app.screen

        def tests_of(label: str) -> str:
            column = next(c for c in picker.query(BranchColumn) if c.label == label)
            return column.tests_line or ""

        await wait_for(pilot, lambda: "exit" in tests_of("a") and "exit" in tests_of("b"))
        assert tests_of("a") == "tests ✓ `test -f a.txt` exit 0"
        assert tests_of("b") == "tests ✗ `test -f a.txt` exit 1"
        await pilot.press("escape")


async def test_the_diff_report_is_built_off_the_event_loop(
    project: Path, gated: GatedModel
) -> None:
    """Issue 15.5: while the report is built, the event loop keeps running callbacks."""
    from forkdeck.merge.outcome import build_report

    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await open_fork(pilot, ["!echo a > a.txt", "!echo b > b.txt"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        coordinator = coordinator_of(app)
        original = coordinator.diff_report
        loop = asyncio.get_running_loop()
        ticked: list[bool] = []

        def report_while_the_loop_runs(paths: list[str] | None = None) -> object:
            # Blocks until the event loop has run a callback: on the loop itself this
            # could never happen (the wait would time out).
            event = threading.Event()
            loop.call_soon_threadsafe(event.set)
            ticked.append(event.wait(5))
            return original(paths)

        setattr(coordinator, "diff_report", report_while_the_loop_runs)  # noqa: B010 (an instance attribute over the method)
        report = await build_report(app.session)
        assert ticked == [True]
        assert {e.path for e in report.paths} >= {"a.txt", "b.txt"}
        await app.session.abort_fork()


async def test_config_approval_required_makes_branches_ask_before_running_tools(
    project: Path, gated: GatedModel
) -> None:
    """Issue 13.23: ``[fork] approval_required`` in config.toml turns tool approvals on;
    the dialog decides, end to end, what each branch's sandbox actually ran."""
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir()
    config.write_text('[fork]\napproval_required = ["run_command"]\n')
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        assert app.session.config_problems == []
        await open_fork(pilot, ["!echo a > a.txt", "!echo b > b.txt"])
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalModal), what="approval")
        first = screen_as(app, ApprovalModal).label
        assert "run_command" in screen_text_of(app) and f"echo {first} > {first}.txt" in (
            screen_text_of(app)
        )
        await pilot.press("y", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalModal), what="approval 2")
        second = screen_as(app, ApprovalModal).label
        assert second != first
        await pilot.press("escape")  # deny all
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        coordinator = coordinator_of(app)
        views = {rt.label: view_of(rt) for rt in coordinator.branches.values()}
        assert (views[first] / f"{first}.txt").read_text() == f"{first}\n"
        assert not (views[second] / f"{second}.txt").exists()
        await app.session.abort_fork()


def screen_text_of(app: object) -> str:
    from tests.app.fixtures_fork import screen_text

    return screen_text(app)  # type: ignore[arg-type]


def test_a_bad_approval_required_value_is_reported(project: Path) -> None:
    from branching_core.config import SettingsStore

    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir()
    config.write_text('[fork]\napproval_required = "run_command"\n')
    store = SettingsStore(project)
    assert store.settings.approval_required == ()
    assert any(p.key == "fork.approval_required" for p in store.problems)
    config.write_text('[fork]\napproval_required = ["write_file", "*"]\n')
    session = ChatSession(project)
    assert session.approval_policy() is True


async def test_a_merge_waiting_on_a_running_branch_shows_a_spinner_and_seconds(
    project: Path, gated: GatedModel
) -> None:
    """Issue 13.10: a wait of seconds shows what is awaited, a spinner and the time spent;
    it clears when the wait ends."""
    hold = gated.gate("hold")
    app = make_app(project, gated.model)
    seen: list[str | None] = []
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        bar = chat.status
        original = bar.set_busy

        def record(label: str | None) -> None:
            seen.append(label)
            original(label)

        app.session.on_busy = record
        await open_fork(pilot, ["!echo a > a.txt", "hold b"])
        assert seen[:2] == ["spawning 2 branches", None]
        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="picker")
        await pilot.press("2", "enter")  # b is still running: the merge waits for it
        await wait_for(pilot, lambda: "waiting for branch b to finish…" in bar.text)
        first = bar.text
        await wait_for(pilot, lambda: bar.text != first, what="the spinner to move")
        assert any(frame in bar.text for frame in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏") and " s" in bar.text
        hold.set()
        await wait_for(pilot, lambda: not app.session.fork_active and chat.fork_area is None)
        assert bar.busy is None and "waiting" not in bar.text
        assert "merging branch b" in seen
