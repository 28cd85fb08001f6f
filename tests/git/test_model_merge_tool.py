"""Issue 25.3: the model's own ``merge_or_select`` tool can commit the landed files
(``git_commit=True``): a pydantic-ai Agent on a FunctionModel drives the fork itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import Agent

from branching_core.agent import SandboxCommandRunner
from branching_core.live import LiveForkCapability
from tests.fork.helpers import Scripted, call

from .repo import git, head, make_repo, porcelain


@dataclass
class Deps:
    fork_coordinator: Any = None


async def test_model_merges_and_commits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project")
    (repo / "README.txt").write_text("the user's edit\n")
    before = head(repo)
    script = Scripted(
        {
            "P": [
                call("fork_run", specs=[{"label": "x", "steer": "write the answer"}]),
                call("wait_branches", timeout=30),
                call("merge_or_select", action="pick:x", git_commit=True,
                     git_message="Add the answer"),
            ],
            "write the answer": [call("write_file", path="answer.txt", content="42\n")],
        }
    )
    cap = LiveForkCapability(workspace=repo, command_runner=SandboxCommandRunner())
    deps = Deps()
    await Agent(script.model, capabilities=[cap]).run("P", deps=deps)
    assert deps.fork_coordinator.is_resolved
    assert git(repo, "rev-parse", "HEAD^").strip() == before
    assert git(repo, "log", "-1", "--format=%s").strip() == "Add the answer"
    assert git(repo, "diff", "--name-only", before, "HEAD").split() == ["answer.txt"]
    assert porcelain(repo) == " M README.txt\n"
    results = [
        part.content
        for messages in script.requests_for("P")[-1:]
        for message in messages
        for part in getattr(message, "parts", [])
        if getattr(part, "tool_name", None) == "merge_or_select" and hasattr(part, "content")
    ]
    assert any("git: committed 1 path(s)" in str(r) for r in results)
