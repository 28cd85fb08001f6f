"""Pictures of the chat screen: idle (offline greeting) and a broken config file.

Fixed terminal size, the ``copy`` backend (the same on every machine), no cursor blink,
and nothing on screen that depends on the tmp path or the clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forkdeck.forkdeck_app import ForkdeckApp
from forkdeck.session import ChatSession

from tests.app.conftest import open_fork, ready, states

SIZE = (110, 30)


def _app(root: Path) -> ForkdeckApp:
    session = ChatSession(root, backend="copy")
    return ForkdeckApp(session, cursor_blink=False, offer_recovery=False)


async def _settled(pilot: Any) -> None:
    await ready(pilot)
    await pilot.pause()


def test_chat_idle(project: Path, snap_compare: Any) -> None:
    assert snap_compare(_app(project), terminal_size=SIZE, run_before=_settled)


def test_chat_config_error(project: Path, snap_compare: Any) -> None:
    config = project / ".pydantic-deep" / "config.toml"
    config.parent.mkdir()
    config.write_text('[fork]\nbranches = "lots"\n[review]\nmerge_strategy = "coin"\n')
    before = config.read_bytes()
    assert snap_compare(_app(project), terminal_size=SIZE, run_before=_settled)
    assert config.read_bytes() == before


def test_chat_composer_multiline(project: Path, snap_compare: Any) -> None:
    """A pasted block of several lines: the composer grows and says how many lines."""

    async def paste(pilot: Any) -> None:
        from textual import events

        await _settled(pilot)
        pilot.app.post_message(events.Paste("write notes.txt\nfirst line\nsecond line\nend"))
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(_app(project), terminal_size=SIZE, run_before=paste)


def test_fork_view_with_the_log_strip(project: Path, snap_compare: Any) -> None:
    """Two finished offline branches, branch a in front, /tokens and a !cmd in the strip."""
    from tests.app.conftest import submit, wait_for

    async def fork(pilot: Any) -> None:
        await _settled(pilot)
        app = pilot.app
        area = await open_fork(pilot, ["ls", "read README.txt"])
        await wait_for(
            pilot, lambda: set(states(app).values()) == {"done"}, what=lambda: states(app)
        )
        area.select("a")
        await submit(pilot, "/tokens")
        await submit(pilot, "!echo hello from a")
        await wait_for(
            pilot, lambda: app.chat.shell_task is None and "exit 0" in app.chat.last_notice
        )
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(_app(project), terminal_size=SIZE, run_before=fork)
