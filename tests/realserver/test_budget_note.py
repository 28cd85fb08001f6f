"""Issue 14 item 7: the fork picker says which budget rule a model runs under."""

from __future__ import annotations

from pathlib import Path

import pytest
from forkdeck.fork.fork_picker import ForkPickerModal

from tests.app.fixtures_fork import HostApp, screen_text
from tests.realserver.helpers import prepared, write_config
from tests.support.openai_server import ScriptedServer


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


async def test_unpriced_server_model_budgets_by_token_cap(
    root: Path, server: ScriptedServer
) -> None:
    write_config(root, f'[model]\ndefault = "scripted-model"\nbase_url = "{server.url}"\n'
                       "[fork]\ntoken_cap = 5000\n")
    session = await prepared(root, env={})
    assert session.budget_note() == (
        "no known price: a budget is a 5000-token cap ([fork.prices] sets one)"
    )


async def test_user_price_is_named(root: Path, server: ScriptedServer) -> None:
    write_config(
        root,
        f'[model]\ndefault = "scripted-model"\nbase_url = "{server.url}"\n'
        '[fork.prices]\n"scripted-model" = {input = 0.5, output = 1.5}\n',
    )
    session = await prepared(root, env={})
    assert session.budget_note() == "budgets use your price $0.5/$1.5 per Mtok"


async def test_price_flag_overrides(root: Path, server: ScriptedServer) -> None:
    session = await prepared(root, requested_model="m", base_url=server.url, price="2/8", env={})
    assert session.budget_note() == "budgets use your price $2/$8 per Mtok"


async def test_offline_model_has_no_note(root: Path) -> None:
    session = await prepared(root, requested_model="offline", env={})
    assert session.budget_note() is None


async def test_the_picker_shows_the_note() -> None:
    note = "no known price: a budget is a 5000-token cap ([fork.prices] sets one)"
    app = HostApp()
    async with app.run_test(size=(110, 30)) as pilot:
        app.push_screen(ForkPickerModal(2, budget_note=note, cursor_blink=False))
        await pilot.pause()
        assert "a budget is a 5000-token cap" in screen_text(app)
