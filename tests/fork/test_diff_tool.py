"""The agent's ``diff_branches`` tool reports what the TUI and the judge see (one report).

It used to have a diff of its own (``fork/diffs.py``) that disagreed with
``review.build_diff_report``: a rename was a delete plus a create, and its line cap differed.
These tests drive the tool through a real pydantic-ai run and read what the model got.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from branching_core.fork import BranchSpec
from branching_core.live import ForkCoordinator, create_fork_toolset
from branching_core.review.diff_report import MAX_DIFF_LINES

from .helpers import Scripted, call


async def _call_diff_branches(coord: ForkCoordinator, **args: Any) -> tuple[Any, str]:
    """Run an agent whose model calls ``diff_branches(**args)`` once; returns what came back
    (the parsed JSON, or the retry text when the tool failed) and the part kind."""
    seen: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if part.part_kind in ("tool-return", "retry-prompt"):
                    seen.append(part)
                    return ModelResponse(parts=[TextPart("seen")])
        return ModelResponse(parts=[ToolCallPart("diff_branches", args)])

    agent = Agent(FunctionModel(model), toolsets=[create_fork_toolset(lambda: coord)])
    await agent.run("compare the branches")
    part = seen[0]
    if part.part_kind == "retry-prompt":
        return part.model_response(), part.part_kind
    content = part.content
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except json.JSONDecodeError:  # a failed tool: its message, as the model reads it
            pass
    return content, part.part_kind


async def test_diff_branches_uses_the_review_report_renames_and_caps(ws, runner) -> None:
    long_text = "".join(f"line {i}\n" for i in range(2 * MAX_DIFF_LINES))
    s = Scripted(
        {
            "R": [  # a rename: same bytes under a new name
                call("write_file", path="src/main.py", content="VALUE = 1\n"),
                call("delete_file", path="src/app.py"),
            ],
            "L": [call("write_file", path="long.txt", content=long_text)],
            "S1": [call("write_file", path="same.txt", content="same\n")],
            "S2": [call("write_file", path="same.txt", content="same\n")],
        }
    )
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
    await coord.fork(
        [
            BranchSpec("r", "R"),
            BranchSpec("l", "L"),
            BranchSpec("s1", "S1"),
            BranchSpec("s2", "S2"),
        ],
        parent_history=[],
    )
    await coord.wait(timeout=60)
    got, kind = await _call_diff_branches(coord)
    assert kind == "tool-return"
    by_path = {p["path"]: p for p in got["paths"]}
    # The rename is one change at the new path, as in the TUI's report.
    assert set(by_path) == {"src/main.py", "long.txt", "same.txt"}
    (renamed,) = by_path["src/main.py"]["branches"].values()
    assert renamed["label"] == "r" and renamed["operation"] == "renamed"
    assert renamed["old_path"] == "src/app.py"
    assert got["summary"]["renamed_paths"] == 1
    # The long diff carries the review report's cap (head and tail), readable text.
    (long_change,) = by_path["long.txt"]["branches"].values()
    assert "truncated" in long_change["diff"]
    assert len(long_change["diff"].splitlines()) <= MAX_DIFF_LINES + 2
    # Two branches with the same result: one diff, the other points at it.
    same = by_path["same.txt"]
    assert same["agreement"] == "unanimous_change"
    entries = sorted(same["branches"].values(), key=lambda e: e["label"])
    assert "+same" in entries[0]["diff"] and entries[1] == {
        "label": "s2",
        "operation": "created",
        "same_as": "s1",
    }
    # The same data as the typed report the TUI and judge read.
    report = coord.diff_report()
    assert [p.path for p in report.paths] == [p["path"] for p in got["paths"]]
    assert coord.diff() == got
    # A filter outside the workspace is a tool failure the model can read, not a crash.
    text, _kind = await _call_diff_branches(coord, paths=["../etc/passwd"])
    assert isinstance(text, str) and "must be relative to the workspace" in text
    await coord.abort_fork()
    assert not Path(ws.path, "src/main.py").exists()
