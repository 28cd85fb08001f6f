"""Full garbage collections stay short while the TUI runs (issue 13, Performance).

Measured during tab switches with ten branches streaming: a generation-2 collection walked
every object the process kept (Textual, pydantic-ai, the agent, the fork) and took 130-195
ms, the tab switch's p95. The app now freezes what is alive once it is prepared and again
when a fork's UI is open (``app/gc_freeze.py``), so collections walk only newer objects;
the frozen objects go back to the collector when the app ends. No wall-clock figures
here: those are in ``benchmarks/tui.py``.
"""

from __future__ import annotations

import gc
from pathlib import Path

from tests.app.conftest import TERMINAL, GatedModel, chat_screen, make_app, open_fork, ready


def walked_by_collections(obj: object) -> bool:
    """True when the collector still walks ``obj`` (frozen objects are not listed)."""
    return any(o is obj for o in gc.get_objects())


async def test_long_lived_objects_are_frozen_while_the_app_runs_and_released_after(
    project: Path, gated: GatedModel
) -> None:
    assert gc.get_freeze_count() == 0
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        prepared = gc.get_freeze_count()
        assert prepared > 0
        assert not walked_by_collections(chat)  # built before the freeze: not walked

        area = await open_fork(pilot, ["!echo a > a.txt", "!echo b > b.txt"])
        assert gc.get_freeze_count() > prepared
        assert not walked_by_collections(area)  # the fork's widgets: not walked either

        fresh = [object()]  # anything made afterwards is still collected as before
        assert walked_by_collections(fresh)
    assert gc.get_freeze_count() == 0  # the app ended: everything is collectable again
