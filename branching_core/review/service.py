"""``ReviewService``: the review layer's implementation of the fork layer's ``ForkReview``.

The fork coordinator asks its ``ForkOptions.review`` for diff reports and judge decisions
(``fork/review_port.py``) because review sits below fork and fork may not import it; the
public ``ForkCoordinator`` (``branching_core.live``) passes one of these.
"""

from __future__ import annotations

from typing import Any

from branching_core.review.diff_report import build_diff_report, user_edit_marks
from branching_core.review.resolver import resolve


class ReviewService:
    """Diff report and judge for a ``ForkCoordinator`` (stateless; one can serve many)."""

    def diff_report(self, coordinator: Any, paths: list[str] | None) -> Any:
        handle = coordinator.handle
        runtimes = list(coordinator.branches.values())
        return build_diff_report(
            handle.fork_id,
            runtimes,
            paths,
            parent_path=coordinator.parent_path,
            user_edits=user_edit_marks(coordinator),
        )

    async def resolve(self, coordinator: Any, strategy: Any, **kwargs: Any) -> Any:
        return await resolve(coordinator, strategy, **kwargs)

    def __repr__(self) -> str:
        return "ReviewService()"


__all__ = ["ReviewService"]
