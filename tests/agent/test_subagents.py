"""Sub-agent branches (seed 002) on real agents, real workspaces, FunctionModel scripts.

Every sub-agent runs a real pydantic-ai ``Agent`` in a real copy-on-write branch of a real
``Workspace``; the models are ``FunctionModel`` scripts keyed by the sub-agent's own input
message, so each test states exactly what each model does at each step.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from branching_core.agent import LocalCommandRunner
from branching_core.errors import BranchError, BranchExecutionError
from branching_core.live.subagents import (
    BRANCH_RESULT_PREFIX,
    SubAgent,
    SubAgentBranches,
    SubAgentFinished,
    SubAgentProgress,
    SubAgentStarted,
    SubAgentToolResult,
    branch,
)
from branching_core.live.subagents.runner import SUMMARY_INSTRUCTIONS
from branching_core.workspace import Workspace

DEADLINE = 20.0  # a deadlocked test fails with a clear message instead of hanging
TASK = "Task:"
BRANCH_MARK = "[Branch: "

# -- scripted models ---------------------------------------------------------------------------


def _prompt_texts(message: ModelMessage) -> list[str]:
    if not isinstance(message, ModelRequest):
        return []
    return [
        p.content
        for p in message.parts
        if p.part_kind == "user-prompt" and isinstance(p.content, str)
    ]


def results_since(messages: list[ModelMessage], marker: str) -> list[Any]:
    """Tool results after the last request whose user prompt starts with ``marker``."""
    start = max(
        (i for i, m in enumerate(messages) if any(t.startswith(marker) for t in _prompt_texts(m))),
        default=0,
    )
    return [
        p
        for m in messages[start:]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if p.part_kind in ("tool-return", "retry-prompt")
    ]


Step = str | ToolCallPart | list[ToolCallPart] | Callable[..., Any]


class Script:
    """A FunctionModel whose n-th answer follows n tool results since its ``marker`` prompt."""

    def __init__(self, steps: list[Step], *, marker: str = BRANCH_MARK, name: str = "script"):
        self.steps = steps
        self.marker = marker
        self.requests: list[tuple[list[ModelMessage], AgentInfo]] = []
        self.model = FunctionModel(self._respond, model_name=name)

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append((list(messages), info))
        n = len(results_since(messages, self.marker))
        step = self.steps[min(n, len(self.steps) - 1)]
        if callable(step) and not isinstance(step, ToolCallPart):
            step = step(messages, info)
            if inspect.isawaitable(step):
                step = await step
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        parts = step if isinstance(step, list) else [step]
        return ModelResponse(parts=list(parts))


def call(tool: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool, args)


def finish(**fields: Any) -> ToolCallPart:
    return ToolCallPart("__finish__", fields)


def text_of(part: ToolReturnPart) -> str:
    """A tool return's text: the branch tools answer with strings (fails otherwise)."""
    assert isinstance(part.content, str), part.content
    return part.content


def tool_returns(messages: list[ModelMessage], tool: str) -> list[ToolReturnPart]:
    return [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == tool
    ]


def own_messages(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A sub-agent's own part of its history (from its ``[Branch: ...]`` input on)."""
    start = max(
        i
        for i, m in enumerate(messages)
        if any(t.startswith(BRANCH_MARK) for t in _prompt_texts(m))
    )
    return messages[start:]


async def run_parent(agent: Agent[Any, Any], prompt: str = f"{TASK} check the claims") -> Any:
    try:
        return await asyncio.wait_for(agent.run(prompt), DEADLINE)
    except TimeoutError:
        pytest.fail(f"the parent run did not finish within {DEADLINE}s (deadlock?)")


# -- definitions and fixtures ------------------------------------------------------------------


class ClaimInput(BaseModel):
    claim: str = Field(description="The claim to verify")


class Verification(BaseModel):
    """Whether a claim holds, with evidence."""

    verified: bool
    explanation: str


FACT_CHECK = SubAgent(
    name="FactCheck",
    description="Verify factual claims using available tools.",
    initial_input=ClaimInput,
    final_output=Verification,
    max_steps=6,
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("original notes\n")
    return root


@pytest.fixture(params=["auto", "copy"])
def workspace(project: Path, request: pytest.FixtureRequest) -> Workspace:
    """Every behaviour on the backend this machine picks and on the plain-copy one."""
    return Workspace(project, backend=request.param)


def registry(workspace: Workspace | None, *definitions: SubAgent, **kw: Any) -> SubAgentBranches:
    return SubAgentBranches(
        definitions=list(definitions),
        workspace=workspace,
        command_runner=LocalCommandRunner(),
        **kw,
    )


def parent_agent(script: Script, subagents: SubAgentBranches, **kw: Any) -> Agent[Any, str]:
    return Agent(script.model, capabilities=[subagents], **kw)


# -- discovery ---------------------------------------------------------------------------------


async def test_discovery_lists_every_branch_with_its_input_schema(workspace: Workspace) -> None:
    strict = FACT_CHECK.with_(name="FactCheckStrict", description="Verify with two sources.")
    summary = SubAgent(name="Summary", description="Summarize the discussion so far.")
    subagents = registry(workspace, FACT_CHECK, strict, summary)
    parent = Script([call("branch"), "listed"], marker=TASK)

    result = await run_parent(parent_agent(parent, subagents))

    (listing,) = tool_returns(result.all_messages(), "branch")
    text = text_of(listing)
    assert text.startswith("<available_branches>")
    for name in ("FactCheck", "FactCheckStrict", "Summary"):
        assert f"<name>{name}</name>" in text
    assert "<description>Verify factual claims using available tools.</description>" in text
    assert "<description>Verify with two sources.</description>" in text
    # the input schema of FactCheck: one field, required, with its description
    assert "<name>claim</name>" in text
    assert "<type>string</type>" in text
    assert "<required>true</required>" in text
    assert "<description>The claim to verify</description>" in text
    # a branch without initial_input says so, and discovery ran nothing
    assert text.count("<input_schema/>") == 1
    assert subagents.runs == []
    # the tool's own schema names the registered branches for the model
    info = parent.requests[0][1]
    (branch_def,) = [t for t in info.function_tools if t.name == "branch"]
    assert branch_def.parameters_json_schema["properties"]["name"]["enum"] == [
        "FactCheck",
        "FactCheckStrict",
        "Summary",
    ]


# -- parallel runs, isolation and landing ------------------------------------------------------


async def test_two_branches_in_one_turn_overlap_and_both_land(
    workspace: Workspace, project: Path
) -> None:
    barrier = asyncio.Barrier(2)
    inside: list[str] = []

    def meet(name: str) -> Callable[..., Any]:
        async def step(messages: list[ModelMessage], info: AgentInfo) -> ToolCallPart:
            inside.append(name)
            # Both sub-agents must be mid-run at once to pass: run one after the other and
            # the first waits here forever (the test's deadline then fails it).
            await barrier.wait()
            return finish(verified=True, explanation=f"{name} agrees")

        return step

    scripts = {
        name: Script([call("write_file", path=f"{name}.txt", content=f"{name}\n"), meet(name)])
        for name in ("alpha", "beta")
    }
    # the same definition registered twice under other names, with other models
    defs = [FACT_CHECK.with_(name=n, model=s.model) for n, s in scripts.items()]
    subagents = registry(workspace, *defs)
    parent = Script(
        [
            [
                call("branch", name="alpha", claim="A"),
                call("branch", name="beta", claim="B"),
            ],
            "both checked",
        ],
        marker=TASK,
    )

    result = await run_parent(parent_agent(parent, subagents))

    assert result.output == "both checked"
    assert sorted(inside) == ["alpha", "beta"]
    returns = {p.tool_call_id: p for p in tool_returns(result.all_messages(), "branch")}
    assert len(returns) == 2
    for part in returns.values():
        assert part.outcome == "success"
        assert text_of(part).startswith("<branch_result>")
        assert "<verified>true</verified>" in text_of(part)
    # both siblings' files reached the parent (the second one was stale: applied per path)
    assert (project / "alpha.txt").read_text() == "alpha\n"
    assert (project / "beta.txt").read_text() == "beta\n"
    runs = {r.name: r for r in subagents.runs}
    assert {r.state for r in runs.values()} == {"done"}
    assert all(r.committed for r in runs.values())
    # the first to finish committed; the other, now stale, was applied path by path
    assert sorted(r.landed_by or "" for r in runs.values()) == ["commit", "per_path"]
    assert runs["alpha"].created == ["alpha.txt"]
    assert {r.tool_call_id for r in runs.values()} == set(returns)
    assert workspace.open_branches() == []


async def test_failing_branch_is_discarded_and_successful_one_is_visible(
    workspace: Workspace, project: Path
) -> None:
    def explode(messages: list[ModelMessage], info: AgentInfo) -> Any:
        raise RuntimeError("model endpoint exploded")

    good = Script(
        [
            call("write_file", path="good.txt", content="kept\n"),
            call("edit_file", path="notes.txt", old="original", new="revised"),
            finish(verified=True, explanation="fine"),
        ]
    )
    bad = Script([call("write_file", path="bad.txt", content="lost\n"), explode])
    subagents = registry(
        workspace,
        FACT_CHECK.with_(name="good", model=good.model),
        FACT_CHECK.with_(name="bad", model=bad.model),
    )
    parent = Script(
        [[call("branch", name="good", claim="x"), call("branch", name="bad", claim="y")], "ok"],
        marker=TASK,
    )

    result = await run_parent(parent_agent(parent, subagents))

    assert (project / "good.txt").read_text() == "kept\n"
    assert (project / "notes.txt").read_text() == "revised notes\n"
    assert not (project / "bad.txt").exists()
    by_outcome = {p.outcome: p for p in tool_returns(result.all_messages(), "branch")}
    failed = text_of(by_outcome["failed"])
    assert failed.startswith("Branch execution failed: bad failed: RuntimeError")
    assert "model endpoint exploded" in failed
    assert "its file changes were discarded" in failed
    bad_run = next(r for r in subagents.runs if r.name == "bad")
    assert bad_run.state == "failed"
    assert not bad_run.committed
    assert bad_run.created == ["bad.txt"]  # what it had done is still on record
    # the cause is kept (the model's own exception, somewhere in the chain)
    chain, exc = [], bad_run.exception
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    assert any(isinstance(e, RuntimeError) and "exploded" in str(e) for e in chain)
    # and so is its transcript
    assert any("write_file" in line for line in bad_run.transcript_lines())
    assert workspace.open_branches() == []


async def test_conflicting_change_is_reported_and_parent_keeps_its_version(
    workspace: Workspace, project: Path
) -> None:
    async def parent_edits_meanwhile(messages: list[ModelMessage], info: AgentInfo) -> Any:
        await asyncio.sleep(0.02)  # past one kernel timestamp tick after the branch was made
        (project / "notes.txt").write_text("the parent's own edit\n")
        return finish(verified=False, explanation="done")

    sub = Script(
        [call("write_file", path="notes.txt", content="sub-agent edit\n"), parent_edits_meanwhile]
    )
    subagents = registry(workspace, FACT_CHECK.with_(model=sub.model))
    parent = Script([call("branch", name="FactCheck", claim="z"), "ok"], marker=TASK)

    result = await run_parent(parent_agent(parent, subagents))

    (part,) = tool_returns(result.all_messages(), "branch")
    assert part.outcome == "failed"
    assert "could not be applied" in text_of(part) and "notes.txt" in text_of(part)
    assert (project / "notes.txt").read_text() == "the parent's own edit\n"
    (run,) = subagents.runs
    assert run.state == "conflict" and run.conflicts == ["notes.txt"]


# -- merge strategies --------------------------------------------------------------------------


async def test_summarize_comes_from_a_second_model_call(workspace: Workspace) -> None:
    def summarizer(messages: list[ModelMessage], info: AgentInfo) -> str:
        assert info.instructions is not None and SUMMARY_INSTRUCTIONS in info.instructions
        (prompt,) = [t for m in messages for t in _prompt_texts(m)]
        assert "-> search_notes" in prompt  # it was given the sub-agent's transcript
        return "It searched the notes once and confirmed the claim."

    summary_script = Script([summarizer])

    def search_notes(topic: str) -> str:
        """Search the notes."""
        return f"notes about {topic}: confirmed"

    sub = Script(
        [call("search_notes", topic="python"), finish(verified=True, explanation="notes agree")]
    )
    definition = FACT_CHECK.with_(
        model=sub.model, tools=[search_notes], summary_model=summary_script.model
    )
    subagents = registry(workspace, definition)
    parent = Script(
        [call("branch", name="FactCheck", merge="summarize", claim="Python is from 1991"), "ok"],
        marker=TASK,
    )

    result = await run_parent(parent_agent(parent, subagents))

    (part,) = tool_returns(result.all_messages(), "branch")
    assert part.content == (
        "Branch summary:\nIt searched the notes once and confirmed the claim.\n\n"
        'Final result:\n{"verified": true, "explanation": "notes agree"}'
    )
    assert len(summary_script.requests) == 1  # the summary is its own model call
    assert len(sub.requests) == 2
    (run,) = subagents.runs
    assert run.merge == "summarize" and run.summary is not None
    assert run.usage.requests == 3


async def test_without_final_output_end_result_falls_back_to_summarize() -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> str:
        if info.instructions and SUMMARY_INSTRUCTIONS in info.instructions:
            return "Summed up the talk."
        assert info.output_tools == []  # no finish tool: it answers in text
        return "The discussion was about Python."

    script = Script([answer])
    summary = SubAgent(name="Summary", description="Summarize the discussion.", model=script.model)
    subagents = registry(None, summary)
    parent = Script([call("branch", name="Summary"), "ok"], marker=TASK)

    result = await run_parent(parent_agent(parent, subagents))

    (part,) = tool_returns(result.all_messages(), "branch")
    assert part.content == (
        "Branch summary:\nSummed up the talk.\n\nFinal result:\nThe discussion was about Python."
    )
    assert subagents.runs[0].merge == "summarize"


# -- inheritance, parent tools and nesting -----------------------------------------------------


async def test_branch_inherits_history_but_not_the_system_prompt(workspace: Workspace) -> None:
    sub = Script([finish(verified=True, explanation="ok")])
    subagents = registry(
        workspace, FACT_CHECK.with_(model=sub.model, system_prompt="You check facts strictly.")
    )
    parent = Script([call("branch", name="FactCheck", claim="c1"), "ok"], marker=TASK)
    agent = parent_agent(parent, subagents, system_prompt="PARENT SYSTEM PROMPT")

    await run_parent(agent, f"{TASK} is Python from 1991?")

    messages, info = sub.requests[0]
    prompts = [t for m in messages for t in _prompt_texts(m)]
    assert prompts[0] == f"{TASK} is Python from 1991?"  # the parent's conversation
    assert prompts[-1].startswith("[Branch: FactCheck]") and '"claim": "c1"' in prompts[-1]
    kinds = [p.part_kind for m in messages for p in m.parts]
    assert "system-prompt" not in kinds
    assert info.instructions is not None
    assert info.instructions.startswith("You check facts strictly.")
    # the parent's pending branch call is not part of the sub-agent's history
    assert not any(p.part_kind == "tool-call" for m in messages for p in m.parts)
    assert [t.name for t in info.output_tools] == ["__finish__"]


async def test_nested_branch_reaches_only_its_immediate_parents_tools(workspace: Workspace) -> None:
    def root_secret() -> str:
        """A tool only the root agent has."""
        return "root secret"

    def mid_lookup(key: str) -> str:
        """A tool of the middle sub-agent."""
        return f"mid value for {key}"

    leaf = Script(
        [
            call("call_parent_tool"),
            call("call_parent_tool", name="root_secret"),
            call("call_parent_tool", name="branch"),
            call("call_parent_tool", name="mid_lookup", key="k1"),
            finish(verified=True, explanation="leaf done"),
        ]
    )
    mid = Script(
        [
            call("call_parent_tool"),
            call("branch", name="Leaf", claim="inner"),
            finish(verified=True, explanation="mid done"),
        ]
    )
    leaf_def = FACT_CHECK.with_(name="Leaf", model=leaf.model)
    mid_def = FACT_CHECK.with_(name="Mid", model=mid.model, tools=[mid_lookup], branches=[leaf_def])
    subagents = registry(workspace, mid_def)
    parent = Script([call("branch", name="Mid", claim="outer"), "ok"], marker=TASK)

    result = await run_parent(parent_agent(parent, subagents, tools=[root_secret]))

    assert result.output == "ok"
    # the middle sub-agent sees the root's own tools (and not branch / finish / itself)
    mid_listing = json.loads(text_of(tool_returns(mid.requests[1][0], "call_parent_tool")[0]))
    assert [t["name"] for t in mid_listing] == ["root_secret"]
    # the leaf sees only the middle one's tools: not the root's, never branch or finish
    leaf_messages = own_messages(leaf.requests[-1][0])
    listing, secret, via_branch, lookup = tool_returns(leaf_messages, "call_parent_tool")
    assert [t["name"] for t in json.loads(text_of(listing))] == ["mid_lookup"]
    assert secret.outcome == "failed" and "no tool 'root_secret'" in text_of(secret)
    assert via_branch.outcome == "failed" and "no tool 'branch'" in text_of(via_branch)
    assert lookup.content == "mid value for k1"
    # inherited directly too (Acorn's default), again only the immediate parent's
    leaf_tools = {t.name for t in leaf.requests[0][1].function_tools}
    assert "mid_lookup" in leaf_tools and "root_secret" not in leaf_tools
    assert "branch" not in leaf_tools
    # the nested run is kept under its parent run, one level deeper
    (mid_run,) = subagents.runs
    (leaf_run,) = mid_run.children
    assert (leaf_run.depth, leaf_run.parent_run_id) == (2, mid_run.run_id)
    assert [r.name for r in subagents.iter_runs()] == ["Mid", "Leaf"]
    assert leaf_run.workspace_branch is not None and mid_run.workspace_branch is not None
    assert leaf_run.workspace_branch.startswith(mid_run.workspace_branch + "/")


async def test_parent_tools_allow_list_and_max_depth(workspace: Workspace) -> None:
    def root_a() -> str:
        """Allowed."""
        return "a"

    def root_b() -> str:
        """Not allowed."""
        return "b"

    leaf = Script([finish(verified=True, explanation="never runs")])
    mid = Script(
        [
            call("call_parent_tool"),
            call("branch", name="Leaf", claim="too deep"),
            finish(verified=True, explanation="ok"),
        ]
    )
    leaf_def = FACT_CHECK.with_(name="Leaf", model=leaf.model)
    mid_def = FACT_CHECK.with_(
        name="Mid", model=mid.model, branches=[leaf_def], parent_tools=["root_a"]
    )
    subagents = registry(workspace, mid_def, max_depth=1)
    parent = Script([call("branch", name="Mid", claim="c"), "ok"], marker=TASK)

    await run_parent(parent_agent(parent, subagents, tools=[root_a, root_b]))

    own = own_messages(mid.requests[-1][0])
    (listing,) = tool_returns(own, "call_parent_tool")
    assert [t["name"] for t in json.loads(text_of(listing))] == ["root_a"]
    assert {"root_a"} == {t.name for t in mid.requests[0][1].function_tools} & {
        "root_a",
        "root_b",
    }
    (too_deep,) = tool_returns(own, "branch")
    assert too_deep.outcome == "failed"
    assert "Leaf would nest 2 levels deep (max_depth is 1)" in text_of(too_deep)
    assert leaf.requests == []


async def test_nested_files_land_in_the_parent_branch_then_in_the_workspace(
    workspace: Workspace, project: Path
) -> None:
    leaf = Script(
        [
            call("write_file", path="leaf.txt", content="from leaf\n"),
            finish(verified=True, explanation="ok"),
        ]
    )

    def mid_checks_leaf_file(messages: list[ModelMessage], info: AgentInfo) -> ToolCallPart:
        return call("read_file", path="leaf.txt")

    mid = Script(
        [
            call("branch", name="Leaf", claim="inner"),
            mid_checks_leaf_file,
            finish(verified=True, explanation="ok"),
        ]
    )
    leaf_def = FACT_CHECK.with_(name="Leaf", model=leaf.model)
    subagents = registry(
        workspace, FACT_CHECK.with_(name="Mid", model=mid.model, branches=[leaf_def])
    )
    parent = Script([call("branch", name="Mid", claim="outer"), "ok"], marker=TASK)

    await run_parent(parent_agent(parent, subagents))

    (read,) = tool_returns(mid.requests[-1][0], "read_file")
    assert read.content == "from leaf\n"  # the leaf landed in the middle one's branch
    assert (project / "leaf.txt").read_text() == "from leaf\n"  # which landed in the workspace


# -- limits: timeout, cancellation, budget, steps ----------------------------------------------


async def test_timeout_cancels_the_branch_and_the_parent_sees_a_clear_error(
    workspace: Workspace, project: Path
) -> None:
    cancelled = asyncio.Event()

    async def hang(messages: list[ModelMessage], info: AgentInfo) -> Any:
        try:
            await asyncio.Event().wait()  # a model that never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise

    sub = Script([call("write_file", path="partial.txt", content="half\n"), hang])
    subagents = registry(workspace, FACT_CHECK.with_(model=sub.model, timeout_s=0.5))
    parent = Script([call("branch", name="FactCheck", claim="slow"), "recovered"], marker=TASK)

    result = await run_parent(parent_agent(parent, subagents))

    assert result.output == "recovered"  # the parent carried on
    assert cancelled.is_set()  # the sub-agent's model call was really cancelled
    (part,) = tool_returns(result.all_messages(), "branch")
    assert part.outcome == "failed"
    assert part.content == (
        "Branch execution failed: FactCheck timed out after 0.5s and was cancelled; "
        "its file changes were discarded"
    )
    assert not (project / "partial.txt").exists()
    (run,) = subagents.runs
    assert run.state == "timed_out" and isinstance(run.exception, TimeoutError)
    assert workspace.open_branches() == []


async def test_cancel_a_running_branch_from_a_listener(workspace: Workspace, project: Path) -> None:
    async def hang(messages: list[ModelMessage], info: AgentInfo) -> Any:
        await asyncio.Event().wait()

    sub = Script([call("write_file", path="x.txt", content="x\n"), hang])
    subagents = registry(workspace, FACT_CHECK.with_(model=sub.model))
    events: list[str] = []

    def listener(event: Any) -> None:
        events.append(type(event).__name__)
        if isinstance(event, SubAgentToolResult) and event.tool_name == "write_file":
            assert event.content == "created x.txt (2 bytes)"
            assert event.run.cancel("the user pressed stop")

    subagents.add_listener(listener)
    parent = Script([call("branch", name="FactCheck", claim="c"), "ok"], marker=TASK)

    result = await run_parent(parent_agent(parent, subagents))

    (part,) = tool_returns(result.all_messages(), "branch")
    assert "FactCheck was cancelled (the user pressed stop)" in text_of(part)
    assert not (project / "x.txt").exists()
    assert events[0] == "SubAgentStarted" and events[-1] == "SubAgentFinished"
    assert subagents.runs[0].state == "terminated"


async def test_budget_stops_a_branch_after_the_response_that_crossed_it(
    workspace: Workspace,
) -> None:
    calls: list[str] = []

    def tick(label: str) -> str:
        """Record a call."""
        calls.append(label)
        return "ticked"

    sub = Script([call("tick", label="first"), call("tick", label="second"), finish()])
    definition = FACT_CHECK.with_(model=sub.model, tools=[tick], budget_usd=1.5)
    subagents = registry(workspace, definition, price_fn=lambda response: 1.0)
    parent = Script([call("branch", name="FactCheck", claim="c"), "ok"], marker=TASK)

    result = await run_parent(parent_agent(parent, subagents))

    assert calls == ["first"]  # the second response was priced, then stopped before its tool
    (part,) = tool_returns(result.all_messages(), "branch")
    assert "exhausted its budget of $1.5 (spent $2.000000)" in text_of(part)
    (run,) = subagents.runs
    assert run.state == "budget_exhausted" and run.cost_usd == 2.0


async def test_price_fn_that_raises_stops_a_budgeted_branch_as_budget_unknown(
    workspace: Workspace,
) -> None:
    """15.2: a broken price_fn once made the cost "unknown", and unknown never crossed a cap."""
    calls: list[str] = []

    def tick(label: str) -> str:
        """Record a call."""
        calls.append(label)
        return "ticked"

    def broken(response: Any) -> float:
        raise KeyError("no price table")

    sub = Script([call("tick", label="first"), call("tick", label="second"), finish()])
    definition = FACT_CHECK.with_(model=sub.model, tools=[tick], budget_usd=0.01)
    subagents = registry(workspace, definition, price_fn=broken)
    parent = Script([call("branch", name="FactCheck", claim="c"), "ok"], marker=TASK)

    result = await run_parent(parent_agent(parent, subagents))

    assert calls == []  # stopped at its first response, before that response's tool ran
    (part,) = tool_returns(result.all_messages(), "branch")
    assert "cost is unknown" in text_of(part) and "no price table" in text_of(part)
    (run,) = subagents.runs
    assert run.state == "budget_unknown"


async def test_max_steps_bounds_model_requests(workspace: Workspace) -> None:
    sub = Script([call("list_dir")])  # never finishes
    subagents = registry(workspace, FACT_CHECK.with_(model=sub.model, max_steps=3))
    parent = Script([call("branch", name="FactCheck", claim="c"), "ok"], marker=TASK)

    result = await run_parent(parent_agent(parent, subagents))

    (part,) = tool_returns(result.all_messages(), "branch")
    assert "FactCheck used its 3 steps without finishing" in text_of(part)
    assert len(sub.requests) == 3
    assert subagents.runs[0].state == "step_limit"


# -- bad input ---------------------------------------------------------------------------------


async def test_bad_branch_calls_are_clear_tool_errors_and_touch_nothing(
    workspace: Workspace, project: Path
) -> None:
    sub = Script([finish(verified=True, explanation="never")])
    subagents = registry(workspace, FACT_CHECK.with_(model=sub.model))
    parent = Script(
        [
            [
                call("branch", name="Nope"),
                call("branch", name="FactCheck"),
                call("branch", name="FactCheck", claim="c", merge="everything"),
            ],
            "ok",
        ],
        marker=TASK,
    )
    before = sorted(p.name for p in project.iterdir())

    result = await run_parent(parent_agent(parent, subagents))

    texts = sorted(text_of(p) for p in tool_returns(result.all_messages(), "branch"))
    assert texts == [
        "branch: invalid input for FactCheck: claim: Field required",
        "branch: merge must be one of end_result, summarize, not 'everything'",
        "branch: no sub-agent named 'Nope' (registered: FactCheck)",
    ]
    assert sub.requests == [] and subagents.runs == []
    assert sorted(p.name for p in project.iterdir()) == before


def test_definitions_refuse_bad_settings() -> None:
    with pytest.raises(ValueError, match="two sub-agents are registered as 'FactCheck'"):
        SubAgentBranches(definitions=[FACT_CHECK, FACT_CHECK])
    with pytest.raises(ValueError, match="must start with a letter"):
        FACT_CHECK.with_(name="fact check")
    with pytest.raises(TypeError, match="final_output must be a pydantic BaseModel"):
        SubAgent(name="X", final_output=dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        FACT_CHECK.with_(max_steps=0)


# -- programmatic branching --------------------------------------------------------------------


async def test_programmatic_branch_returns_typed_output_and_records_the_result(
    workspace: Workspace, project: Path
) -> None:
    sub = Script(
        [
            call("write_file", path="checked.txt", content="yes\n"),
            finish(verified=True, explanation="confirmed"),
        ]
    )
    subagents = registry(workspace)
    history: list[ModelMessage] = []

    output = await subagents.branch(FACT_CHECK.with_(model=sub.model), history, claim="c")

    assert isinstance(output, Verification)
    assert output == Verification(verified=True, explanation="confirmed")
    (message,) = history
    (text,) = _prompt_texts(message)
    assert text.startswith(f"{BRANCH_RESULT_PREFIX} FactCheck:\n<branch_result>")
    assert (project / "checked.txt").read_text() == "yes\n"


async def test_programmatic_branch_failure_raises_branch_error_with_its_cause(
    workspace: Workspace,
) -> None:
    def explode(messages: list[ModelMessage], info: AgentInfo) -> Any:
        raise ConnectionError("API timeout")

    sub = Script([explode])
    subagents = registry(workspace)
    history: list[ModelMessage] = []

    with pytest.raises(BranchError) as caught:
        await subagents.branch(FACT_CHECK.with_(model=sub.model), history, claim="c")

    error = caught.value
    assert isinstance(error, BranchExecutionError)
    assert str(error) == (
        "Branch execution failed: FactCheck failed: ConnectionError: API timeout; "
        "its file changes were discarded"
    )
    assert isinstance(error.__cause__, ConnectionError)
    assert error.run is subagents.runs[0] and error.name == "FactCheck"
    assert history == []  # nothing recorded for a failure

    with pytest.raises(BranchExecutionError, match="invalid input for FactCheck") as bad:
        await subagents.branch(FACT_CHECK.with_(model=sub.model), history, clam="typo")
    assert isinstance(bad.value.__cause__, ValidationError)


async def test_programmatic_branch_from_a_tool_enqueues_the_branch_result(
    workspace: Workspace,
) -> None:
    sub = Script([finish(verified=False, explanation="no source")])
    checker = FACT_CHECK.with_(model=sub.model)
    subagents = registry(workspace)
    seen: list[Any] = []

    async def verify_then_report(ctx: RunContext[Any], claim: str) -> str:
        """Verify a claim with a sub-agent."""
        result = await branch(checker, ctx, claim=claim)  # the run's own registry
        seen.append(result)
        return "verification requested"

    def parent_sees(messages: list[ModelMessage], info: AgentInfo) -> str:
        texts = [t for m in messages for t in _prompt_texts(m)]
        return "saw: " + next(t for t in texts if t.startswith(BRANCH_RESULT_PREFIX))

    parent = Script([call("verify_then_report", claim="c"), parent_sees], marker=TASK)
    agent = parent_agent(parent, subagents, tools=[verify_then_report])

    result = await run_parent(agent)

    assert seen == [Verification(verified=False, explanation="no source")]
    assert result.output.startswith("saw: [Branch Result] FactCheck:\n<branch_result>")
    assert [r.name for r in subagents.runs] == ["FactCheck"]  # kept in the run's registry


# -- records and events for a UI ---------------------------------------------------------------


async def test_runs_are_kept_with_events_for_an_expandable_tool_call(
    workspace: Workspace, tmp_path: Path
) -> None:
    sub = Script(
        [
            call("write_file", path="r.txt", content="r\n"),
            finish(verified=True, explanation="ok"),
        ]
    )
    subagents = registry(
        workspace, FACT_CHECK.with_(model=sub.model), transcript_dir=tmp_path / "runs"
    )
    events: list[Any] = []
    subagents.add_listener(events.append)
    parent = Script([call("branch", name="FactCheck", claim="c"), "ok"], marker=TASK)

    result = await run_parent(parent_agent(parent, subagents))

    (part,) = tool_returns(result.all_messages(), "branch")
    run = subagents.find_run(part.tool_call_id)
    assert run is not None and run is subagents.runs[0]
    assert isinstance(events[0], SubAgentStarted) and events[0].run is run
    assert isinstance(events[-1], SubAgentFinished)
    progress = [e for e in events if isinstance(e, SubAgentProgress)]
    streamed = [m for e in progress for m in e.new_messages]
    assert streamed == run.messages  # the UI saw every message once, in order
    assert run.result_text == part.content
    assert run.arguments == {"claim": "c"} and run.model_name == "function:script"
    assert run.transcript_lines()[0].startswith("user: [Branch: FactCheck]")
    assert "-> write_file" in run.transcript_lines()[1]
    assert run.duration_s is not None and run.duration_s >= 0
    saved = json.loads((tmp_path / "runs" / f"{run.run_id}.json").read_text())
    assert saved["state"] == "done" and saved["created"] == ["r.txt"]
    assert saved["output"] == {"verified": True, "explanation": "ok"}
    assert saved["tool_call_id"] == part.tool_call_id


def test_offline_example_runs_without_an_api_key(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    target = tmp_path / "example"
    done = subprocess.run(
        [sys.executable, "-m", "examples.subagents", str(target)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "FORKDECK_STORE": str(tmp_path / "_example_store")},
    )
    assert done.returncode == 0, done.stderr
    assert "parent says: 3 of 4 packages analysed." in done.stdout
    assert "timed out after 5s and was cancelled" in done.stdout
    assert sorted(p.name for p in (target / "reports").iterdir()) == [
        "httpx.md",
        "requests.md",
        "rich.md",
    ]
