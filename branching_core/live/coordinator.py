"""The public ``ForkCoordinator``: the fork layer's coordinator with the review layer wired in.

``branching_core.fork.ForkCoordinator`` runs, persists and merges forks; it cannot import
``branching_core.review`` (review sits below fork, DESIGN.md "Layers"), so its
``diff_report()``, ``resolve()`` and ``merge_or_select("auto")`` use the ``ForkOptions.review``
they are given. This subclass, in the agent-facing layer above both, gives it
``branching_core.review.ReviewService`` unless the options name another. It is what
``from branching_core import ForkCoordinator`` and ``LiveForkCapability`` use; nested and
recovered forks are built with the same class and inherit the options whole.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from branching_core.fork.coordinator import ForkCoordinator as _ForkEngine
from branching_core.review.service import ReviewService

DEFAULT_REVIEW = ReviewService()


class ForkCoordinator(_ForkEngine):
    """``branching_core.fork.ForkCoordinator`` with ``ForkOptions.review`` defaulting to
    :class:`~branching_core.review.service.ReviewService` (same signature, same methods)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.options.review is None:
            self.options = replace(self.options, review=DEFAULT_REVIEW)


__all__ = ["DEFAULT_REVIEW", "ForkCoordinator"]
