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
behind it) has been loaded. Both are cheap (no collection runs). ``gc.unfreeze()`` when
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
