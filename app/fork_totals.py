"""``ForkTotals``: what the live fork cost so far.

Why a module of its own: the session computes it and the merge settles it
(``app.merge.resolution``), which sits above the session and must not import it back
(``app.session`` re-exports the class).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ForkTotals:
    """Cost and tokens of the live fork, read from the coordinator (0 with no fork)."""

    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_estimated: bool = False
