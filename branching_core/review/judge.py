"""``JudgeAgent``: a pydantic-ai agent that picks the winning branch, by label.

The judge sees three bounded sections and nothing else: the goal, the diff report, and one
outcome line per branch (state, requests, tool calls, errors, retries, cost, tests, final
message). Never the branches' message histories: that keeps its cost predictable and its
attention on results. The whole prompt is capped at ``MAX_JUDGE_PROMPT_CHARS``.

It answers with a :class:`JudgeVerdict`; ``winner`` must name a branch by its label (a
branch id is accepted too; case, quotes and surrounding whitespace are forgiven). Anything
else is asked again once, in the same conversation, listing the valid labels; a second
miss is reported as ``winner_id=None`` so the caller falls back to the manual picker. Every
run's ``usage`` is returned separately from the branches' usage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models import Model

from branching_core.errors import InvalidArgumentError, error_name
from branching_core.review.types import (
    USER_EDIT_TEXT,
    BranchDiffReport,
    BranchOutcome,
    JudgeVerdict,
)

MAX_JUDGE_PROMPT_CHARS = 32_000
GOAL_CHARS = 4_000
OUTCOME_CHARS = 800
"""Per branch: the final message is cut to fit."""
OUTCOMES_CHARS = 8_000

JUDGE_SYSTEM_PROMPT = """\
You are the merge judge of a forked coding-agent run. Several branches worked on the same
goal in isolated copies of the project; exactly one of them will be merged.
Compare what each branch changed (the diff report) and how its run went (the outcomes),
then pick the branch that best achieves the goal with correct, complete, minimal changes.
Passing tests matter most; failed runs, errors and retries count against a branch.
Answer with the winning branch's LABEL exactly as listed under "Branches" (not its id).
Set confidence between 0 and 1: how sure you are this branch is the best one to merge.
Keep the rationale short and concrete."""

WRITING_JUDGE_SYSTEM_PROMPT = """\
You are the merge judge of a forked research/writing run. Several branches worked on the
same goal in isolated copies of the project; exactly one of them will be merged.
Compare the texts each branch produced (the diff report) and how its run went (the
outcomes), then pick the branch whose result best answers the goal: accurate (no claims
the sources or the project do not support), complete, well organised and clear, in the
form and length the goal asks for. Prefer substance over polish and over length.
Failed runs and errors count against a branch; tests, if any, are a minor signal.
Answer with the winning branch's LABEL exactly as listed under "Branches" (not its id).
Set confidence between 0 and 1: how sure you are this branch is the best one to merge.
Keep the rationale short and concrete."""

JUDGE_PROMPTS: dict[str, str] = {
    "code": JUDGE_SYSTEM_PROMPT,
    "writing": WRITING_JUDGE_SYSTEM_PROMPT,
}
"""The judge's instructions per domain (see ``branching_core.review.domain``)."""
PROCESS_CHARS = 2_000
"""The "how each branch worked" section (``process_report``) is cut to this."""


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    marker = f"\n... [{len(text) - limit} characters truncated] ..."
    return text[: max(limit - len(marker), 0)] + marker


def _fmt_cost(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def format_outcome(o: BranchOutcome, *, limit: int = OUTCOME_CHARS) -> str:
    """One bullet per branch: label first, then the run's facts, then its final message."""
    facts = [
        f"state {o.state}",
        f"turns {o.turns}",
        f"model requests {o.requests}",
        f"tool calls {o.tool_calls}",
        f"errors {o.error_count}",
        f"retries {o.retry_count}",
        f"cost {_fmt_cost(o.cost_usd)}",
    ]
    if o.tests is not None:
        t = o.tests
        if t.source == "none":
            facts.append(f"tests: no result ({t.error or 'not run'})")
        elif t.collected == 0:
            facts.append("tests: none collected")
        else:
            facts.append(f"tests {t.passed}/{t.total} passed ({t.source})")
    line = f"- {o.label} (id {o.branch_id}): " + ", ".join(facts)
    if o.error:
        line += f"\n  error: {o.error}"
    final = (o.final_message or "").strip() or "(no final message)"
    return truncate(f"{line}\n  final message: {final}", limit)


def format_report(report: BranchDiffReport, *, limit: int) -> str:
    """The diff report as text: per path, each branch's operation and diff (shared diffs once)."""
    s = report.summary
    head = (
        f"{s.total_paths_touched} path(s) touched: {s.unanimous_change_paths} identical in "
        f"several branches, {s.split_paths} split, {s.unique_paths} touched by one branch, "
        f"{s.renamed_paths} renamed; agreement_score {s.agreement_score:.2f}\n"
    )
    parts = [head]
    used = len(head)
    for entry in report.paths:
        lines = [f"\n### {entry.path} ({entry.agreement})\n"]
        seen: dict[str, str] = {}
        for change in entry.branches.values():
            if not change.touched:
                continue
            what = change.operation
            if change.operation == "renamed":
                what = f"renamed {change.old_path} -> {change.path}"
            if change.user_edit is not None:
                what = f"{what} ({USER_EDIT_TEXT[change.user_edit]})"
            diff = change.unified_diff_vs_parent
            same = seen.get(diff)
            if same is not None:
                lines.append(f"- {change.label}: {what}, same result as {same}\n")
                continue
            seen[diff] = change.label
            lines.append(f"- {change.label}: {what}\n")
            if diff:
                lines.append(f"```diff\n{diff.rstrip()}\n```\n")
        block = "".join(lines)
        if used + len(block) > limit:
            rest = len(report.paths) - (len(parts) - 1)
            parts.append(f"\n... [{rest} more path(s) not shown: prompt budget] ...\n")
            break
        parts.append(block)
        used += len(block)
    return truncate("".join(parts), limit)


def build_judge_prompt(
    goal: str | None,
    report: BranchDiffReport | None,
    outcomes: Sequence[BranchOutcome],
    *,
    max_chars: int = MAX_JUDGE_PROMPT_CHARS,
    process_summary: str | None = None,
) -> str:
    """Goal + branches (+ how each worked) + diff report, each section capped, the total
    at ``max_chars``."""
    goal_text = truncate((goal or "(the goal was not recorded)").strip(), GOAL_CHARS)
    per = max(OUTCOMES_CHARS // max(len(outcomes), 1), 200)
    outcome_text = "\n".join(format_outcome(o, limit=min(per, OUTCOME_CHARS)) for o in outcomes)
    labels = ", ".join(o.label for o in outcomes)
    head = (
        f"## Goal\n{goal_text}\n\n"
        f"## Branches (answer with one of these labels: {labels})\n{outcome_text}\n\n"
    )
    if process_summary and process_summary.strip():
        head += f"## How each branch worked\n{truncate(process_summary.strip(), PROCESS_CHARS)}\n\n"
    head += "## Diff report\n"
    budget = max(max_chars - len(head), 0)
    body = format_report(report, limit=budget) if report is not None else "(no diff report)"
    return truncate(head + body, max_chars)


def match_branch(answer: str, outcomes: Sequence[BranchOutcome]) -> str | None:
    """The branch id ``answer`` names (label or id, case/quotes/space forgiven), else None."""
    text = answer.strip().strip("`'\"").strip()
    if not text:
        return None
    for o in outcomes:
        if text == o.label or text == o.branch_id:
            return o.branch_id
    folded = text.casefold()
    hits = [o.branch_id for o in outcomes if o.label.casefold() == folded]
    if len(hits) == 1:
        return hits[0]
    hits = [o.branch_id for o in outcomes if o.branch_id.casefold() == folded]
    return hits[0] if len(hits) == 1 else None


@dataclass
class JudgeDecision:
    """One judge's pick: the (last) verdict, the branch it names, and every run's usage."""

    verdict: JudgeVerdict | None
    winner_id: str | None
    winner_label: str | None
    usage: list[Any] = field(default_factory=list)
    asked: int = 0
    error: str | None = None
    model_name: str = ""


def _model(model: str | Model | None) -> Model | str:
    if isinstance(model, Model):
        return model
    from branching_core.agent import resolve_model

    return resolve_model(model)


class JudgeAgent:
    """Picks the winning branch with a structured :class:`JudgeVerdict`.

    ``model`` is a model name (resolved by ``branching_core.agent.resolve_model``: any
    ``provider:model``, ``offline``, an OpenAI-compatible URL) or a pydantic-ai ``Model``
    (``FunctionModel``/``TestModel`` in tests). The agent is built once; concurrent
    ``evaluate`` calls share it.
    """

    def __init__(
        self, model: str | Model | None = None, *, max_prompt_chars: int = MAX_JUDGE_PROMPT_CHARS
    ) -> None:
        self.model = _model(model)
        self.max_prompt_chars = max_prompt_chars
        self._agents: dict[str, Agent[None, JudgeVerdict]] = {}
        self.agent: Agent[None, JudgeVerdict] = self.agent_for("code")

    def agent_for(self, domain: str) -> Agent[None, JudgeVerdict]:
        """The judge agent with ``domain``'s instructions (built once per domain)."""
        if domain not in JUDGE_PROMPTS:
            raise InvalidArgumentError(
                f"unknown judge domain {domain!r}: use {', '.join(JUDGE_PROMPTS)}"
            )
        agent = self._agents.get(domain)
        if agent is None:
            agent = self._agents[domain] = Agent(
                self.model,
                output_type=JudgeVerdict,
                instructions=JUDGE_PROMPTS[domain],
                name="forkdeck-judge",
            )
        return agent

    @property
    def model_name(self) -> str:
        from branching_core.agent import display_name

        return display_name(self.model)

    async def evaluate(
        self,
        goal: str | None,
        diff_report: BranchDiffReport | None,
        outcomes: Sequence[BranchOutcome],
        *,
        domain: str = "code",
        process_summary: str | None = None,
    ) -> tuple[JudgeVerdict, Any]:
        """Run the judge once: ``(verdict, usage)`` (no label check; see :meth:`decide`)."""
        prompt = build_judge_prompt(
            goal,
            diff_report,
            outcomes,
            max_chars=self.max_prompt_chars,
            process_summary=process_summary,
        )
        result = await self.agent_for(domain).run(prompt)
        return result.output, result.usage

    async def decide(
        self,
        goal: str | None,
        diff_report: BranchDiffReport | None,
        outcomes: Sequence[BranchOutcome],
        *,
        domain: str = "code",
        process_summary: str | None = None,
    ) -> JudgeDecision:
        """Run the judge; re-ask once if its ``winner`` names no branch. Never raises for a
        judge failure: the decision then has ``winner_id=None`` and ``error`` set.

        ``domain`` picks the instructions (``code`` or ``writing``, see ``judge_domain``);
        ``process_summary`` is the bounded "how each branch worked" text."""
        decision = JudgeDecision(None, None, None, model_name=self.model_name)
        if not outcomes:
            decision.error = "no branch to judge"
            return decision
        agent = self.agent_for(domain)
        prompt = build_judge_prompt(
            goal,
            diff_report,
            outcomes,
            max_chars=self.max_prompt_chars,
            process_summary=process_summary,
        )
        labels = ", ".join(o.label for o in outcomes)
        history: list[Any] | None = None
        for attempt in range(2):
            decision.asked = attempt + 1
            try:
                result = await agent.run(prompt, message_history=history)
            except Exception as exc:  # a model/provider failure: fall back, say why
                decision.error = f"judge failed: {error_name(exc)}: {exc}"
                return decision
            decision.usage.append(result.usage)
            verdict = result.output
            decision.verdict = verdict
            winner = match_branch(verdict.winner, outcomes)
            if winner is not None:
                decision.winner_id = winner
                decision.winner_label = next(o.label for o in outcomes if o.branch_id == winner)
                decision.error = None
                return decision
            decision.error = f"judge named {verdict.winner!r}, which is not a branch"
            history = result.all_messages()
            prompt = (
                f"{verdict.winner!r} is not one of the branches. Answer again with exactly "
                f"one of these labels: {labels}."
            )
        return decision


__all__ = [
    "JUDGE_PROMPTS",
    "JUDGE_SYSTEM_PROMPT",
    "MAX_JUDGE_PROMPT_CHARS",
    "WRITING_JUDGE_SYSTEM_PROMPT",
    "JudgeAgent",
    "JudgeDecision",
    "build_judge_prompt",
    "format_outcome",
    "format_report",
    "match_branch",
    "truncate",
]
