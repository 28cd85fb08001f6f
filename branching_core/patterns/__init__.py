"""The seven exploration patterns, each returning a ``SpeculationOutcome``.

``Speculate`` (race), ``BestOfN`` (best score, or rollouts with ``commit=False``),
``Reflexion`` (retry with critique), ``TreeOfThoughts`` and ``BeamSearch`` (search
across depths with ``expand(path, depth)``), ``Tournament`` (pairwise judge) and
``Cascaded`` (widening waves with error feedback). They share one runner
(``_runner``), so ``timeout``, ``overall_timeout``, ``resource_limits``,
``isolate_processes``, scoring and statuses mean the same thing in all of them.
Each takes ``runner=`` (``runners``): where candidates run, this machine by default,
a Ray cluster with ``branching_core.cluster.RayRunner``.
"""

from __future__ import annotations

from branching_core.patterns.basic import BestOfN, Cascaded, Reflexion, Speculate, Tournament
from branching_core.patterns.commands import CommandCandidate, CommandOutput, CommandTask
from branching_core.patterns.result import (
    ABORTED,
    CANCELLED,
    COMMITTED,
    FAILED,
    LOST_RACE,
    TIMED_OUT,
    SpeculationOutcome,
    SpeculationResult,
)
from branching_core.patterns.runners import LocalRunner, Runner, RunSession
from branching_core.patterns.search import BeamSearch, TreeOfThoughts

__all__ = [
    "ABORTED",
    "CANCELLED",
    "COMMITTED",
    "FAILED",
    "LOST_RACE",
    "TIMED_OUT",
    "BeamSearch",
    "BestOfN",
    "Cascaded",
    "CommandCandidate",
    "CommandOutput",
    "CommandTask",
    "LocalRunner",
    "Reflexion",
    "RunSession",
    "Runner",
    "Speculate",
    "SpeculationOutcome",
    "SpeculationResult",
    "Tournament",
    "TreeOfThoughts",
]
