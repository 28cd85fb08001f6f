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
import weakref
from pathlib import Path

from forkdeck.common.confirm import ConfirmModal

from tests.app.conftest import (
    TERMINAL,
    GatedModel,
    chat_screen,
    escape,
    make_app,
    open_fork,
    ready,
    wait_for,
)


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


class Node:
    """A reference cycle: only a collection can free it."""

    def __init__(self) -> None:
        self.me = self


async def test_objects_frozen_while_a_fork_was_open_are_collected_after_it_closes(
    project: Path, gated: GatedModel
) -> None:
    """A frozen object is never collected: garbage frozen with a fork's view (its
    widgets, the transcripts they hold) would stay in memory until the app ended."""
    gated.gate("hold")
    app = make_app(project, gated.model)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        node = Node()
        dead = weakref.ref(node)
        await open_fork(pilot, ["hold a", "hold b"])  # freezes the cycle with the fork view
        del node
        gc.collect()
        assert dead() is not None  # frozen: not collected while the fork is open
        await wait_for(pilot, lambda: len(gated.requests) == 2, what="both branches asked")
        await escape(pilot, ConfirmModal)  # on the overview: abort the fork
        await pilot.press("y")
        await wait_for(pilot, lambda: chat.fork_area is None and not app.session.fork_active)
        await wait_for(pilot, lambda: dead() is None, what="the frozen garbage collected")
        assert gc.get_freeze_count() > 0  # what lives on is frozen again
        gated.release_all()
