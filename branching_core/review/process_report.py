"""How each branch worked: its tool-call sequence, aligned across branches (``process_report``).

Why: two branches can end with similar diffs after very different runs (one read the code
and wrote once; the other guessed, failed, retried five times). The diff report cannot
show that; this can, for a person comparing branches and, as a bounded summary, for the
judge.

What: for each branch, every tool call it made after the fork point (the seed history
copied from the parent is skipped), read from its message history with pydantic-ai's typed
parts: a ``ToolCallPart`` in a ``ModelResponse`` is a step; the ``ToolReturnPart`` with the
same ``tool_call_id`` gives its status (``success``, ``failed``, ``denied``,
``interrupted``, ``retried``); a legacy ``RetryPromptPart`` is ``retried``; no answer is
``pending``. The duration is the answer's timestamp minus the response's (so it includes
the other calls of the same response); the cost is the response's price split evenly over
its tool calls (``None`` when the price is unknown).

Besides the tool steps, ``moments`` lists per branch everything else that shaped it, in
order (issue 24.12: a text-only branch showed an empty view): the prompts and steers it
received, each model request and what came back, then the user's ``!cmd``s and IDE edits
in that branch.

Alignment is by step index; ``diverged_at`` is the first index at which the branches'
steps differ by tool name and arguments (the full arguments are compared, through a digest;
the short ``args`` summary is for display), or where one branch stopped calling tools.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

SUMMARY_CHARS = 2_000
ARG_VALUE_CHARS = 40
ARGS_CHARS = 100


@dataclass(frozen=True)
class ToolStep:
    """One tool call of one branch."""

    index: int
    tool: str
    args: str
    """A short ``k=v, ...`` summary of the arguments (values cut to ``ARG_VALUE_CHARS``)."""
    key: str
    """``tool`` plus a digest of the full arguments: equal keys mean the same call."""
    status: str
    duration_s: float | None = None
    cost_usd: float | None = None
    tool_call_id: str = ""

    def label(self) -> str:
        """``write_file(path='a.py') failed`` (status omitted when it succeeded)."""
        tail = "" if self.status == "success" else f" {self.status}"
        return f"{self.tool}({self.args}){tail}"


@dataclass(frozen=True)
class ProcessMoment:
    """One thing in a branch's run: ``kind`` is ``prompt``, ``steer``, ``request`` (a model
    request and what it answered), ``command`` (a user's ``!cmd``) or ``edit`` (a file the
    user edited in the branch's mirror)."""

    kind: str
    text: str


MOMENT_TEXT_CHARS = 70


def _short(text: str, limit: int = MOMENT_TEXT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def branch_moments(
    history: Sequence[ModelMessage], commands: Sequence[str] = (), edits: Sequence[str] = ()
) -> list[ProcessMoment]:
    """The moments of one branch from its history after the fork point (see the module
    docstring); ``commands`` and ``edits`` follow (they carry no time in the history)."""
    moments: list[ProcessMoment] = []
    prompts_seen = 0
    requests = 0
    for message in history:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    kind = "prompt" if prompts_seen == 0 else "steer"
                    prompts_seen += 1
                    moments.append(ProcessMoment(kind, _short(part.content)))
        elif isinstance(message, ModelResponse):
            requests += 1
            calls = [p.tool_name for p in message.parts if isinstance(p, ToolCallPart)]
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            said = f"answered {_short(text, 50)!r}" if text.strip() else ""
            called = f"called {', '.join(calls)}" if calls else ""
            what = "; ".join(x for x in (said, called) if x) or "answered nothing"
            moments.append(ProcessMoment("request", f"request {requests}: {what}"))
    moments.extend(ProcessMoment("command", f"!{_short(c)}") for c in commands)
    moments.extend(ProcessMoment("edit", f"you edited {path}") for path in edits)
    return moments


@dataclass
class ProcessReport:
    """Every branch's tool steps (by label, fork order) and where the branches diverged."""

    steps: dict[str, list[ToolStep]] = field(default_factory=dict)
    moments: dict[str, list[ProcessMoment]] = field(default_factory=dict)
    """label -> prompts, steers, model requests, ``!cmd``s and IDE edits, in order."""
    diverged_at: int | None = None
    """First step index where the branches differ; ``None`` when they all made the same calls."""

    def rows(self) -> list[dict[str, ToolStep | None]]:
        """Aligned by index: row ``i`` holds each branch's step ``i`` (``None`` past its end)."""
        n = max((len(s) for s in self.steps.values()), default=0)
        return [
            {label: (s[i] if i < len(s) else None) for label, s in self.steps.items()}
            for i in range(n)
        ]

    def totals(self, label: str) -> dict[str, Any]:
        """Calls, failed (failed/denied/interrupted), retried, summed duration and cost."""
        steps = self.steps[label]
        costs = [s.cost_usd for s in steps]
        return {
            "calls": len(steps),
            "failed": sum(1 for s in steps if s.status in ("failed", "denied", "interrupted")),
            "retried": sum(1 for s in steps if s.status == "retried"),
            "duration_s": sum(s.duration_s or 0.0 for s in steps),
            "cost_usd": None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
        }

    def summary(self, limit: int = SUMMARY_CHARS) -> str:
        """A text of at most ``limit`` characters: the shared first steps once, then each
        branch's totals and its steps from the divergence on (cut per branch to fit)."""
        if not self.steps:
            return "(no branches)"
        cut = self.diverged_at
        lines: list[str] = []
        if len(self.steps) == 1:
            cut = 0  # one branch: all its steps under its name
        elif cut is None:
            first = next(iter(self.steps.values()))
            shared = "; ".join(s.label() for s in first) or "(none)"
            lines.append(
                f"Every branch made the same {len(first)} tool call(s): {_clip(shared, limit // 3)}"
            )
            cut = len(first)
        elif cut > 0:
            first = next(iter(self.steps.values()))[:cut]
            shared = "; ".join(s.label() for s in first)
            lines.append(f"Shared first {cut} step(s): {_clip(shared, limit // 3)}")
            lines.append(f"Diverged at step {cut + 1}.")
        else:
            lines.append("Diverged at step 1.")
        head = "".join(f"{line}\n" for line in lines)
        per = max((limit - len(head)) // max(len(self.steps), 1) - 1, 40)
        blocks = []
        for label, steps in self.steps.items():
            t = self.totals(label)
            cost = "cost unknown" if t["cost_usd"] is None else f"${t['cost_usd']:.4f}"
            text = (
                f"- {label}: {t['calls']} call(s), {t['failed']} failed, "
                f"{t['retried']} retried, {cost}"
            )
            rest = steps[cut:]
            if rest:
                text += ": " + "; ".join(f"{s.index + 1}. {s.label()}" for s in rest)
            blocks.append(_clip(text, per))
        return _clip(head + "\n".join(blocks), limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def _args(part: ToolCallPart) -> tuple[str, str]:
    """(summary, digest) of a call's arguments."""
    args = part.args_as_dict()
    canonical = json.dumps(args, sort_keys=True, default=str, ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    items = []
    for k, v in args.items():
        shown = repr(v) if isinstance(v, str) else json.dumps(v, default=str)
        items.append(f"{k}={_clip(shown, ARG_VALUE_CHARS)}")
    return _clip(", ".join(items), ARGS_CHARS), digest


def _answers(messages: Sequence[Any]) -> dict[str, tuple[str, Any]]:
    """tool_call_id -> (status, timestamp) from every request's returns and retries."""
    out: dict[str, tuple[str, Any]] = {}
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                out[part.tool_call_id] = (str(part.outcome), part.timestamp)
            elif isinstance(part, RetryPromptPart) and part.tool_name:
                out[part.tool_call_id] = ("retried", part.timestamp)
    return out


def tool_steps(
    messages: Sequence[Any], price_fn: Callable[[ModelResponse], float | None] | None = None
) -> list[ToolStep]:
    """The tool calls in ``messages`` with their status, duration and share of cost."""
    answers = _answers(messages)
    steps: list[ToolStep] = []
    for message in messages:
        if not isinstance(message, ModelResponse):
            continue
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        if not calls:
            continue
        share: float | None = None
        if price_fn is not None:
            try:
                price = price_fn(message)
            except Exception:
                price = None
            share = None if price is None else float(price) / len(calls)
        for part in calls:
            status, answered = answers.get(part.tool_call_id, ("pending", None))
            duration = None
            if answered is not None and message.timestamp is not None:
                duration = max((answered - message.timestamp).total_seconds(), 0.0)
            summary, digest = _args(part)
            steps.append(
                ToolStep(
                    index=len(steps),
                    tool=part.tool_name,
                    args=summary,
                    key=f"{part.tool_name}:{digest}",
                    status=status,
                    duration_s=duration,
                    cost_usd=share,
                    tool_call_id=part.tool_call_id,
                )
            )
    return steps


def diverged_at(sequences: Iterable[Sequence[ToolStep]]) -> int | None:
    """First index where the sequences differ by ``key`` (or one ends); ``None`` if equal."""
    seqs = [list(s) for s in sequences]
    if len(seqs) < 2:
        return None
    n = max(len(s) for s in seqs)
    for i in range(n):
        keys = {s[i].key if i < len(s) else None for s in seqs}
        if len(keys) > 1:
            return i
    return None


def build_process_report(
    runtimes: Iterable[Any],
    *,
    price_fn: Callable[[ModelResponse], float | None] | None = None,
    edits: Mapping[str, Sequence[str]] | None = None,
) -> ProcessReport:
    """The process report of a fork's branches (``BranchRuntime``-like: ``label``,
    ``history``, ``seed_history``, optionally ``user_commands``); ``edits``: label -> the
    paths the user edited in that branch (``coord.user_edits()``)."""
    report = ProcessReport()
    for rt in runtimes:
        history = list(getattr(rt, "history", []) or [])
        seed = len(getattr(rt, "seed_history", []) or [])
        report.steps[rt.label] = tool_steps(history[seed:], price_fn)
        report.moments[rt.label] = branch_moments(
            history[seed:],
            list(getattr(rt, "user_commands", []) or []),
            list((edits or {}).get(rt.label, [])),
        )
    report.diverged_at = diverged_at(report.steps.values())
    return report


__all__ = [
    "SUMMARY_CHARS",
    "ProcessMoment",
    "ProcessReport",
    "ToolStep",
    "branch_moments",
    "build_process_report",
    "diverged_at",
    "tool_steps",
]
