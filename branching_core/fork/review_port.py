"""``ForkReview``: what the fork layer needs from the review layer, as a protocol.

The diff report and the judge live in ``branching_core.review``, which sits *below* the
fork layer (it imports fork types; DESIGN.md, "Layers"). So the coordinator never imports
review: ``ForkCoordinator.diff_report()``, ``resolve()`` and ``merge_or_select("auto")``
call the ``ForkOptions.review`` object they are given. The public ``ForkCoordinator``
(``branching_core.ForkCoordinator``, ``branching_core.live``) and ``LiveForkCapability``
fill it with ``branching_core.review.ReviewService``; nested and recovered forks inherit
it with the options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from branching_core.fork.coordinator import ForkCoordinator
    from branching_core.fork.types import MergeStrategy


@runtime_checkable
class ForkReview(Protocol):
    """Builds a fork's cross-branch diff report and settles a fork with a judge."""

    def diff_report(self, coordinator: ForkCoordinator, paths: list[str] | None) -> Any:
        """The typed ``BranchDiffReport`` of the coordinator's open fork."""
        ...

    async def resolve(
        self, coordinator: ForkCoordinator, strategy: MergeStrategy | None, **kwargs: Any
    ) -> Any:
        """A ``ResolveOutcome``: the judge's pick (merged when the strategy says so)."""
        ...


NO_REVIEW = (
    "this coordinator has no review service (ForkOptions.review): build it with "
    "branching_core.ForkCoordinator / branching_core.live.ForkCoordinator, or pass "
    "review=branching_core.review.ReviewService()"
)

__all__ = ["NO_REVIEW", "ForkReview"]
