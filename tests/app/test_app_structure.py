"""Issue 23, finding 4, kept from growing back: the app's features talk to the chat screen
through the protocols they declare (``chat.ports``, ``fork.ports``, ``fork.view``,
``merge.ports``, ``common.ports``), and ``app/`` has no import cycle.

Why grimp: it sees every import statement, ``if TYPE_CHECKING:`` and function-level ones
too, which is exactly how the old 12-module cycle hid (14 ``TYPE_CHECKING`` imports of
``ChatScreen``). The counts themselves are printed by ``structure_counts.py``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import grimp
import pytest

from tests.app.structure_counts import import_cycles, pokes

APP_SHELL = "forkdeck.forkdeck_app"
"""The one module outside ``forkdeck.chat`` that may name the chat screen: the app builds
it, pushes it and hands it to its own start-up steps."""


def test_no_import_cycle_among_the_apps_modules() -> None:
    assert import_cycles("forkdeck", "branching_core") == []


def test_only_the_chat_package_and_the_app_shell_import_the_chat_screen() -> None:
    graph = grimp.build_graph("forkdeck", "branching_core")
    importers = graph.find_modules_that_directly_import("forkdeck.chat.screen")
    outside = {m for m in importers if not m.startswith("forkdeck.chat.")} - {APP_SHELL}
    assert outside == set(), f"import the feature's protocol instead: {sorted(outside)}"


def test_features_do_not_reach_into_the_chat_screen() -> None:
    """Attribute accesses on something typed ``ChatScreen`` outside the screen's module:
    only the app shell's (it owns the screen)."""
    counts = pokes()
    assert set(counts) <= {"forkdeck_app.py"}, counts


def test_the_cycle_finder_sees_a_type_checking_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above can fail: a package whose two modules import each other, one of
    them only for type checking (the shape of the old cycle), is reported."""
    package = tmp_path / "cyclepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "screen.py").write_text("from . import feature\n")
    (package / "feature.py").write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from .screen import Screen
    """))
    (package / "leaf.py").write_text("from . import feature\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclepkg") == [["cyclepkg.feature", "cyclepkg.screen"]]


def test_the_poke_count_sees_a_feature_typed_by_the_screen(tmp_path: Path) -> None:
    """The count can fail too: a feature function and a helper class holding the screen."""
    (tmp_path / "chat").mkdir()
    (tmp_path / "chat" / "screen.py").write_text("class ChatScreen: ...\n")
    (tmp_path / "feature.py").write_text(textwrap.dedent("""
        def run(screen: ChatScreen) -> None:
            screen.notice("hi")
            screen.session.coordinator.abort()

        class Helper:
            def __init__(self, screen: ChatScreen) -> None:
                self.screen = screen

            def go(self) -> None:
                screen = self.screen
                screen.refresh_status()
                self.screen.notice("x")

        def typed_by_protocol(screen: ForkHost) -> None:
            screen.notice("not a poke")
    """))
    assert pokes(tmp_path) == {"feature.py": 4}  # notice, session, refresh_status, notice
