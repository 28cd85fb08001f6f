"""The final states a fork branch and a sub-agent run share (one vocabulary for both).

Both are agent runs: they end ``done`` (finished on their own), ``failed`` (an error),
``terminated`` (stopped from outside: the user, the parent, a cancellation),
``budget_exhausted`` (their priced cost crossed their cap) or ``budget_unknown`` (a
response could not be priced, so a cap could not be checked and the run was stopped).
``done`` and ``terminated`` are the seed's names (``BranchState``, seed 004); the fork
and sub-agent layers add the states only they have (``aggregate_budget_exhausted``,
``awaiting_approval``; ``timed_out``, ``step_limit``, ``conflict``).

A leaf helper (standard library only), so the fork types stay free of pydantic-ai.
"""

from __future__ import annotations

from typing import Literal

SharedFinalState = Literal["done", "failed", "terminated", "budget_exhausted", "budget_unknown"]

SHARED_FINAL_STATES: frozenset[str] = frozenset(
    {"done", "failed", "terminated", "budget_exhausted", "budget_unknown"}
)

FORK_STOPPED_STATES: frozenset[str] = frozenset(
    {"terminated", "budget_exhausted", "aggregate_budget_exhausted", "budget_unknown"}
)
"""Fork branches stopped before they finished (mergeable: their partial work). Here, not in
``branching_core.fork.types``, because the review layer below fork scores them too."""

__all__ = ["FORK_STOPPED_STATES", "SHARED_FINAL_STATES", "SharedFinalState"]
