"""The typed merge choice, re-exported where the fork layer's callers look for it.

Defined once in :mod:`branching_core.merge_action` (a shared leaf below every layer, so
the judge in ``branching_core.review`` can build the pick it merges).
"""

from __future__ import annotations

from branching_core.merge_action import (
    GitCommitRequest,
    MergeAction,
    MergeActionError,
    MergeKind,
    OnConflict,
)

__all__ = ["GitCommitRequest", "MergeAction", "MergeActionError", "MergeKind", "OnConflict"]
