"""The model's merge tool parses the string the model types once, into a ``MergeAction``
(issue 23): a bad action is refused with ``MergeAction.parse``'s own message and nothing
merges; a good one (with "and commit to git" as a typed request) ends the fork."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent

from branching_core.fork import MergeAction, MergeActionError
from branching_core.live import LiveForkCapability

from .helpers import Scripted, call


@dataclass
class Deps:
    fork_coordinator: Any = None


def _feedback(s: Scripted, key: str) -> list[str]:
    return [
        str(getattr(p, "content", ""))
        for m in s.requests_for(key)[-1]
        for p in m.parts
        if p.part_kind in ("tool-return", "retry-prompt")
    ]


async def test_the_merge_tool_refuses_a_bad_action_with_the_one_parser_then_picks(
    project: Path, runner
) -> None:
    s = Scripted(
        {
            "ROOT": [
                call("fork_run", specs=[{"label": "a", "steer": "A"}]),
                call("wait_branches", timeout=30),
                call("merge_or_select", action="choose a"),
                call("merge_or_select", action="  pick:a "),
            ],
            "A": [call("write_file", path="a.txt", content="a\n")],
        }
    )
    deps = Deps()
    cap = LiveForkCapability(workspace=project, command_runner=runner)
    agent = Agent(s.model, capabilities=[cap])
    await agent.run("ROOT", deps=deps)
    with pytest.raises(MergeActionError) as info:
        MergeAction.parse("choose a")
    said = _feedback(s, "ROOT")
    assert any(str(info.value) in text for text in said), said
    assert any('"merged": "a"' in text or "'merged': 'a'" in text for text in said), said
    assert deps.fork_coordinator.is_resolved
    assert (project / "a.txt").read_text() == "a\n"
