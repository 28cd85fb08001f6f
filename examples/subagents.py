"""Sub-agent branches, offline: a dependency scanner that fans out one analyser per package.

Run it from the repository root with no API key (the models are scripted
``FunctionModel``s)::

    python -m examples.subagents            # in a fresh temporary project
    python -m examples.subagents DIR        # in DIR (created if missing; best empty)

(``python examples/subagents.py`` works too once forkdeck is installed, e.g. ``pip install -e .``.)

What it shows (seed 002's map-reduce example, with forkdeck's fixes):

* the parent calls ``branch()`` to discover its sub-agents, then calls
  ``branch(name="PackageAnalyzer", ...)`` three times in one response: they run at once;
* each analyser writes ``reports/<package>.md`` in its own copy-on-write branch; the files
  of those that succeed land in the project, the one that times out leaves nothing behind
  and the parent gets a clear tool error instead;
* every run is kept (``subagents.runs``) with its transcript, state, cost and files, and
  a listener prints events as a UI would render them.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from branching_core.agent import LocalCommandRunner
from branching_core.live.subagents import (
    SubAgent,
    SubAgentBranches,
    SubAgentFinished,
    SubAgentStarted,
    SubAgentToolResult,
)

PACKAGES = {"requests": "HTTP client", "httpx": "HTTP client", "rich": "terminal output"}
SLOW = "slowpkg"  # its analyser hangs: the timeout cancels it


class PackageInput(BaseModel):
    package_name: str = Field(description="The package to analyse")


class PackageProfile(BaseModel):
    """What one package is for."""

    name: str
    purpose: str


def _prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if p.part_kind == "user-prompt" and isinstance(p.content, str)
    ]


def _results(messages: list[ModelMessage]) -> list[Any]:
    return [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if p.part_kind == "tool-return"
    ]


async def analyser(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One package analyser: write a report, then finish with a typed profile."""
    own = _prompts(messages)[-1]  # "[Branch: PackageAnalyzer] ... Input: {...}"
    name = own.split('"package_name": "')[1].split('"')[0]
    done = [p for p in _results(messages) if p.tool_name == "write_file"]
    if name == SLOW:
        await asyncio.Event().wait()  # never answers; timeout_s cancels it
    if not done:
        report = f"# {name}\n\npurpose: {PACKAGES[name]}\n"
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": f"reports/{name}.md", "content": report})]
        )
    profile = {"name": name, "purpose": PACKAGES[name]}
    return ModelResponse(parts=[ToolCallPart("__finish__", profile)])


def scanner(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The parent: discover, fan out in one response, then report what came back."""
    results = [p for p in _results(messages) if p.tool_name == "branch"]
    if not results:
        return ModelResponse(parts=[ToolCallPart("branch", {})])  # discovery
    if len(results) == 1:
        calls = [
            ToolCallPart("branch", {"name": "PackageAnalyzer", "package_name": name})
            for name in [*PACKAGES, SLOW]
        ]
        return ModelResponse(parts=calls)
    ok = sum(1 for p in results[1:] if p.outcome == "success")
    return ModelResponse(parts=[TextPart(f"{ok} of {len(results) - 1} packages analysed.")])


def on_event(event: Any) -> None:
    """What a UI would do: one line per event (the TUI renders an expandable tool call)."""
    if isinstance(event, SubAgentStarted):
        print(f"  started  {event.run.name} {event.run.arguments}")
    elif isinstance(event, SubAgentToolResult):
        print(f"  tool     {event.run.arguments['package_name']}: {event.content}")
    elif isinstance(event, SubAgentFinished):
        run = event.run
        print(f"  finished {run.arguments.get('package_name')}: {run.state}")


async def main(project: Path) -> None:
    (project / "requirements.txt").write_text("\n".join([*PACKAGES, SLOW]) + "\n")
    analyzer = SubAgent(
        name="PackageAnalyzer",
        description="Analyse a single package.",
        model=FunctionModel(analyser, model_name="scripted-analyser"),
        initial_input=PackageInput,
        final_output=PackageProfile,
        max_steps=5,
        timeout_s=5.0,  # the slow one never answers; the others finish well within this under load
    )
    subagents = SubAgentBranches(
        definitions=[analyzer], workspace=project, command_runner=LocalCommandRunner()
    )
    subagents.add_listener(on_event)
    parent = Agent(FunctionModel(scanner, model_name="scripted-scanner"), capabilities=[subagents])

    result = await parent.run("Scan requirements.txt for redundant packages.")

    print(f"\nparent says: {result.output}")
    print("\ndiscovery listing the parent saw:")
    first = next(p for p in _results(result.all_messages()) if p.tool_name == "branch")
    print("  " + first.content.replace("\n", "\n  "))
    print("\nruns kept after they returned:")
    for run in subagents.runs:
        files = ", ".join(run.changed_paths) or "-"
        print(
            f"  {run.arguments['package_name']:<9} {run.state:<10} committed={run.committed!s:<5} "
            f"files={files} requests={run.usage.requests} {run.duration_s:.2f}s"
        )
        if run.error:
            print(f"            error: {run.error}")
    print("\nreports in the project:", sorted(p.name for p in (project / "reports").iterdir()))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = Path(sys.argv[1])
        target.mkdir(parents=True, exist_ok=True)
        asyncio.run(main(target))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(Path(tmp)))
