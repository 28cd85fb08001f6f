"""The ``/fork`` picker's cost estimate: specs from the rows as they are typed, the
estimate off the event loop, and its cells.

Why: a fork multiplies spending by its branch count and every branch re-reads the parent
history; the user should see what that costs per row and in total before Enter, and see a
row whose budget would stop it before it is likely done. The figures are the engine's
(``coord.estimate(specs, parent_history)``, ``branching_core.fork.estimate``); this module
only feeds it the half-typed rows and draws the result.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text

from branching_core.fork import BranchEstimate, BranchSpec, ForkEstimate

if TYPE_CHECKING:
    from ..session import ChatSession

Estimator = Callable[[list[BranchSpec], float | None], ForkEstimate]
"""(specs, aggregate budget) -> the engine's estimate; may be slow: run it in a thread."""

_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*:\S+$")


@dataclass(frozen=True)
class RowValues:
    """One picker row's raw text."""

    label: str
    steer: str
    model: str
    budget: str


def _budget(text: str) -> float | None:
    raw = text.strip().removeprefix("$").strip()
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if value > 0 else None


def lenient_specs(rows: Sequence[RowValues]) -> list[BranchSpec]:
    """Specs for estimating while the rows are still being typed: an empty or duplicate
    label gets a placeholder, an unfinished model the default one, a bad budget none (the
    picker's own checks still refuse them on Enter)."""
    specs: list[BranchSpec] = []
    seen: set[str] = set()
    for slot, row in enumerate(rows, start=1):
        label = row.label.strip() or f"row{slot}"
        if label in seen:
            label = f"{label}-{slot}"
        seen.add(label)
        model = row.model.strip()
        specs.append(
            BranchSpec(
                label=label,
                steer=row.steer.strip(),
                model=model if model in ("offline", "test") or _MODEL_RE.match(model) else None,
                budget_usd=_budget(row.budget),
            )
        )
    return specs


def estimator_for(session: ChatSession) -> Estimator | None:
    """``coord.estimate`` on a coordinator set up as the fork will be (its default model and
    price function), over the chat's history now. ``None`` before the workspace is ready."""
    if session.workspace is None:
        return None
    coordinator: Any = None
    history = list(session.history)

    def estimate(specs: list[BranchSpec], aggregate: float | None) -> ForkEstimate:
        nonlocal coordinator
        if coordinator is None:  # built once, in the worker thread (imports the engine)
            coordinator = session.new_coordinator()
        return coordinator.estimate(specs, history, aggregate_budget_usd=aggregate)

    return estimate


def tokens_text(count: int) -> str:
    """``~850 tok``, ``~41k tok``, ``~1.2M tok``: a size a glance can compare."""
    if count >= 1_000_000:
        return f"~{count / 1_000_000:.1f}M tok"
    if count >= 1_000:
        return f"~{count / 1_000:.0f}k tok"
    return f"~{count} tok"


def _branch_tokens(branch: BranchEstimate) -> int:
    return branch.input_tokens + branch.output_tokens


def cost_cell(branch: BranchEstimate | None) -> Text:
    """``~$0.0312``, ``~$0.0312 !`` (budget below it), or the tokens when no price is
    known (issue 24.11: an unknown price is never drawn as ``$0``)."""
    if branch is None:
        return Text("…", style="dim")
    if branch.cost_usd is None:
        return Text(tokens_text(_branch_tokens(branch)), style="dim")
    if branch.over_budget:
        return Text(f"~${branch.cost_usd:.4f} !", style="bold red")
    return Text(f"~${branch.cost_usd:.4f}")


def total_text(estimate: ForkEstimate | None) -> Text:
    """The total line under the rows, with what it is based on and any budget flags.

    Unknown prices show the tokens those branches will use, never a dollar figure that
    reads as free (``at least ~$0.0000`` told a user nothing)."""
    if estimate is None:
        return Text("estimating…", style="dim italic")
    total = estimate.total_usd
    tokens = sum(_branch_tokens(b) for b in estimate.branches)
    text = Text("estimated: ", style="bold")
    unpriced = [b for b in estimate.branches if b.cost_usd is None]
    if total is None and len(unpriced) == len(estimate.branches):
        text.append(f"{tokens_text(tokens)} in total", style="bold")
        text.append(" (no price known for the model: cost unknown)")
    elif total is None:
        unknown_tokens = sum(_branch_tokens(b) for b in unpriced)
        text.append(f"~${estimate.known_total_usd:.4f}", style="bold")
        text.append(
            f" + {tokens_text(unknown_tokens)} at unknown prices "
            f"({len(unpriced)} branch{'es' if len(unpriced) != 1 else ''})"
        )
    else:
        text.append(f"~${total:.4f} in total", style="bold")
        text.append(f" ({tokens_text(tokens)})")
    requests = estimate.branches[0].requests if estimate.branches else 0
    text.append(
        f" · ~{requests} requests per branch ({estimate.requests_source}) · parent history "
        f"~{estimate.history_tokens} tokens",
        style="dim",
    )
    over = [b.label for b in estimate.branches if b.over_budget]
    if over:
        text.append(f"\n! budget below the estimate: {', '.join(over)}", style="bold red")
    if estimate.over_aggregate:
        text.append(
            f"\n! aggregate budget ${estimate.aggregate_budget_usd:.2f} is below the estimate",
            style="bold red",
        )
    return text


__all__ = [
    "Estimator",
    "RowValues",
    "cost_cell",
    "estimator_for",
    "lenient_specs",
    "tokens_text",
    "total_text",
]
