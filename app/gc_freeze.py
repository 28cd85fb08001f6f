"""Keep Python's full garbage collections short while the TUI runs.

Why: with ten branches streaming, a tab switch repaints the whole panel area and creates
thousands of short-lived objects (Textual strips and their caches). That allocation now
and then starts a *full* (generation 2) collection, which walks every object the process
ever kept: Textual, Rich, pydantic-ai, the agent, the fork. Measured with a gc callback
during tab switches on a loaded 2-core machine, those collections took 130-195 ms each,
one per ~10 switches: they were the tab switch's p95 and max, far more than the layout.

``gc.freeze()`` moves every object tracked so far into the permanent generation, which
collections no longer walk; what is created afterwards is still collected as before. The
app freezes once its first frame is up and again when a fork's UI (and pydantic-ai
behind it) has been loaded. Both are cheap (no collection runs). A frozen object is never
collected, and neither is what it refers to: a fork's widgets frozen when it opened (and
the transcripts they hold) would stay in memory until the app ended once the fork is
closed; so :func:`collect_and_freeze` runs once, shortly after the close, to collect what
died and freeze the rest again. ``gc.unfreeze()`` when
the app ends gives the frozen objects back to the collector, so a process that runs
several apps (the test suite) does not keep their garbage.
"""

from __future__ import annotations

import gc


def freeze_long_lived() -> int:
    """Exclude every object alive now from future collections; how many are frozen."""
    gc.freeze()
    return gc.get_freeze_count()


def unfreeze() -> None:
    """Hand the frozen objects back to the collector (the app is ending)."""
    gc.unfreeze()


def collect_and_freeze() -> None:
    """Unfreeze, collect everything that died (a closed fork's view), freeze the rest.

    One full collection (about 150 ms on a loaded machine): run it once, after a fork's
    view closed, never in the path of a key.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()
