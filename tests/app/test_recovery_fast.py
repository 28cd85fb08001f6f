"""Issue 24.13: the recovery dialog after a crash appears as soon as the screen is up (it
waited for pydantic-ai, the workspace and the model: 11-13 s with a real server), and a
key typed before it appeared never answers it. The model server here is real and holds
its ``/models`` answer until the test lets it go, so start-up is provably unfinished
while the dialog is already shown."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from forkdeck.common.type_ahead import BURST_GAP_S, TypeAheadGuard
from forkdeck.fork.recover_fork import RecoverForkModal
from forkdeck.session import ChatSession
from textual import events

from branching_core.fork import BranchSpec
from tests.app.conftest import TERMINAL, chat_screen, make_app, wait_for


class HeldModels:
    """An OpenAI-compatible ``GET /v1/models`` that answers only once ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        held = self.release

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                held.wait(60)
                body = json.dumps({"data": [{"id": "held-model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def held() -> Iterator[HeldModels]:
    server = HeldModels()
    server.thread.start()
    yield server
    server.release.set()
    server.httpd.shutdown()
    server.httpd.server_close()


async def _crash_a_fork(project: Path) -> None:
    crashed = ChatSession(project, requested_model="offline")
    await asyncio.to_thread(crashed.prepare)
    coordinator = await crashed.start_fork(
        [BranchSpec("a", "!echo a > a.txt"), BranchSpec("b", "!echo b > b.txt")], None
    )
    await coordinator.wait()
    await coordinator.flush()
    await crashed.aclose()  # nobody merged or aborted: left open on disk


async def test_the_dialog_comes_before_start_up_ends_and_ignores_type_ahead(
    project: Path, held: HeldModels
) -> None:
    await _crash_a_fork(project)
    app = make_app(project, held.url, recovery=True)
    async with app.run_test(size=TERMINAL) as pilot:
        typed_early = events.Key("enter", "\r")  # a key typed while the app was loading
        await wait_for(pilot, lambda: isinstance(app.screen, RecoverForkModal), what="dialog")
        modal = app.screen
        assert isinstance(modal, RecoverForkModal)
        assert not app.session.ready  # the model server has not even answered yet
        app.post_message(typed_early)  # queued type-ahead, handled only now
        await pilot.pause(0.1)
        assert app.screen is modal  # the early Enter chose nothing
        await pilot.pause(BURST_GAP_S)  # a person reads the dialog
        await pilot.press("enter")  # a key pressed once it is shown: reopen
        await pilot.pause()
        assert app.screen is not modal
        held.release.set()  # start-up finishes; the choice is carried out then
        chat = chat_screen(app)
        await wait_for(
            pilot, lambda: "reopened" in chat.last_notice, timeout=60, what="reopened"
        )
        assert chat.fork_area is not None
        assert app.session.fork_active and app.session.ready
        assert app.session.model_label.startswith("held-model")
        assert not (project / "a.txt").exists() and not (project / "b.txt").exists()


def _key(name: str, at: float) -> events.Key:
    key = events.Key(name, None)
    key.time = at
    return key


def test_a_burst_typed_as_the_dialog_appears_is_not_an_answer() -> None:
    """The rule on the event clock: a burst under way when the dialog came up is refused
    key by key until a pause; a key after the pause, or when nobody was typing, answers."""
    guard = TypeAheadGuard()
    guard._shown_at = 10.0
    guard._burst_until = 9.9 + BURST_GAP_S  # the last key before it came at 9.9
    assert guard.refuses_key(_key("f", 9.95))  # typed before it was shown
    assert guard.refuses_key(_key("enter", 10.2))  # the burst goes on
    assert guard.refuses_key(_key("down", 10.6))  # still within the gap of the last one
    assert not guard.refuses_key(_key("enter", 10.6 + BURST_GAP_S + 0.01))  # after a pause
    calm = TypeAheadGuard()
    calm._shown_at = 10.0
    assert not calm.refuses_key(_key("enter", 10.05))  # nobody was typing: an answer
